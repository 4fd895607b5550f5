#include "actors/http/request_intake.hpp"  // first: Asio wants <utility> before it under g++ 12

#include <fmt/format.h>

#include "actors/http/http_fields.hpp"
#include "core/common/multipart.hpp"
#include "core/prompt/api_translation.hpp"
#include "core/prompt/tokenize_api.hpp"

namespace kvr::ingress {
namespace {

namespace http = boost::beast::http;

[[nodiscard]] local_answer refusal(const api_error& error) {
  return {static_cast<unsigned>(http_status(error.code)), error_body(error)};
}

/// Round-robin and random decide without reading the prompt (unless a dry run asks to see the
/// decision's terms, which the scorer computes from it).
[[nodiscard]] bool reads_no_prompt(const worker_set_route& set, bool dry_run) {
  return decides_without_state(set.config) && set.hashers.empty() && !dry_run;
}

/// One request being read; its methods are the steps.
class intake_reader {
 public:
  intake_reader(http_ingress::impl& server, io_thread& thread, http::request<http::string_body>& request)
      : server_(server), thread_(thread), request_(request) {}

  intake completion(api_endpoint endpoint) {
    auto table = server_.current_table();
    // A set that reads no prompt gets the body's envelope only (model, stream, user). With one
    // set, its mode decides before anything is parsed; with several, the envelope names the set
    // and a set that reads the prompt then gets the full parse.
    const bool dry_run = request_.find(dry_run_header) != request_.end();
    const bool envelope_first =
        std::ranges::any_of(table->sets, [&](const worker_set_route& s) { return reads_no_prompt(s, dry_run); });
    auto parsed = parse_body(endpoint, envelope_first ? body_reading::envelope : body_reading::full);
    if (!parsed) return std::unexpected(refusal(parsed.error()));
    const worker_set_route* set = table->find(parsed->model);
    if (set == nullptr)
      return std::unexpected(
          refusal({api_errc::unknown_model, fmt::format("The model `{}` does not exist.", parsed->model), "model"}));
    if (envelope_first && !reads_no_prompt(*set, dry_run)) {
      parsed = parse_body(endpoint, body_reading::full);
      if (!parsed) return std::unexpected(refusal(parsed.error()));
    }
    return request_to_route{std::move(table), set, std::move(*parsed)};
  }

  /// Any route kvrouter does not serve itself goes to a worker of the set whose model the body
  /// names (a JSON `model`, or the `model` field of a multipart upload), else of the only set.
  /// SGLang's `/generate` routes on its prompt; the rest on load, the prompt's length estimated
  /// from the body. A body kvrouter cannot read is the engine's to judge, when the set is known.
  intake passthrough(std::string_view path) {
    const api_endpoint endpoint = path == "/generate" ? api_endpoint::generate : api_endpoint::other;
    const std::string& body = request_.body();
    routing_request request;
    request.endpoint = endpoint;
    std::optional<api_error> unreadable;
    const auto content_type = request_.find(http::field::content_type);
    const auto boundary = content_type == request_.end()
                              ? std::nullopt
                              : multipart_boundary(std::string_view(content_type->value().data(), content_type->value().size()));
    if (boundary) {
      if (const auto model = multipart_field(body, *boundary, "model")) request.model = *model;
    } else if (const auto first = body.find_first_not_of(" \t\r\n"); first != std::string::npos && body[first] == '{') {
      auto parsed = parse_body(endpoint, body_reading::full);
      if (parsed) request = std::move(*parsed);
      else unreadable = parsed.error();
      if (parsed && request_.method() == http::verb::post) read_prompt_of_other_apis(path, request);
    }
    if (request.prompt_tokens == 0) request.prompt_tokens = static_cast<std::uint32_t>(std::min<std::size_t>(body.size() / 4, UINT32_MAX));
    auto table = server_.current_table();
    const worker_set_route* set = nullptr;
    if (!request.model.empty()) {
      set = table->find(request.model);
      if (set == nullptr)
        return std::unexpected(
            refusal({api_errc::unknown_model, fmt::format("The model `{}` does not exist.", request.model), "model"}));
    } else if (table->sets.size() == 1) {
      set = &table->sets.front();
    } else if (unreadable) {
      return std::unexpected(refusal(*unreadable));
    } else {
      std::string models;
      for (const worker_set_route& s : table->sets) models += (models.empty() ? "" : ", ") + s.model;
      const std::string_view method(request_.method_string().data(), request_.method_string().size());
      return std::unexpected(refusal(
          {table->sets.empty() ? api_errc::no_worker_available : api_errc::invalid_request,
           table->sets.empty()
               ? std::string("no worker set is configured")
               : fmt::format("{} {} is passed to a worker of the model the body names: give \"model\" (one of {})", method, path, models),
           "model"}));
    }
    if (serves_tokenize(path, *set)) return std::unexpected(tokenize_locally(path, *set));
    return request_to_route{std::move(table), set, std::move(request)};
  }

 private:
  enum class body_reading : std::uint8_t { full, envelope };

  std::expected<routing_request, api_error> parse_body(api_endpoint endpoint, body_reading reading) {
    std::string& body = request_.body();
    const std::size_t size = body.size();
    body.reserve(size + request_parser::padding);  // reserved as the body arrived (parse_buffered): no copy
    const std::string_view bytes(body.data(), size);
    return reading == body_reading::envelope ? thread_.json.parse_envelope(endpoint, bytes, body.capacity())
                                             : thread_.json.parse(endpoint, bytes, body.capacity());
  }

  /// `/v1/responses` and `/v1/messages` route by prefix as the chat they render to (the worker
  /// still gets the body as sent); one whose rendering is not certain routes on load (counted).
  void read_prompt_of_other_apis(std::string_view path, routing_request& request) {
    const bool responses = path == "/v1/responses";
    if (!responses && path != "/v1/messages") return;
    const std::string& body = request_.body();
    auto chat = responses ? responses_as_chat(body, body.capacity()) : messages_as_chat(body, body.capacity());
    if (!chat) return server_.probe.prompt_routed_on_load();
    const std::size_t size = chat->size();
    chat->reserve(size + request_parser::padding);
    auto parsed = thread_.json.parse(api_endpoint::chat_completions, std::string_view(chat->data(), size), chat->capacity());
    if (!parsed || parsed->model != request.model) return server_.probe.prompt_routed_on_load();
    request = std::move(*parsed);
  }

  /// `/tokenize` and `/detokenize` are answered here with the set's own tokenizer and chat
  /// template when it has them (and the request wants nothing only the engine knows).
  [[nodiscard]] bool serves_tokenize(std::string_view path, const worker_set_route& set) const {
    if (request_.method() != http::verb::post || !set.text_tokenizer) return false;
    if (path == "/detokenize") return true;
    return path == "/tokenize" && !tokenize_needs_engine(request_.body());
  }

  local_answer tokenize_locally(std::string_view path, const worker_set_route& set) {
    server_.probe.tokenized_locally();
    tokenizer text = set.text_tokenizer->share();
    auto answer = path == "/detokenize" ? answer_detokenize(request_.body(), text)
                                        : answer_tokenize(request_.body(), text, set.chat.get(), set.chat_plain_fallback,
                                                          server_.settings.max_prompt_tokens);
    if (!answer) return refusal(answer.error());
    return {200, std::move(*answer)};
  }

  http_ingress::impl& server_;
  io_thread& thread_;
  http::request<http::string_body>& request_;
};

}  // namespace

intake read_completion(http_ingress::impl& server, io_thread& thread, http::request<http::string_body>& request,
                       api_endpoint endpoint) {
  return intake_reader(server, thread, request).completion(endpoint);
}

intake read_passthrough(http_ingress::impl& server, io_thread& thread, http::request<http::string_body>& request,
                        std::string_view path) {
  return intake_reader(server, thread, request).passthrough(path);
}

}  // namespace kvr::ingress
