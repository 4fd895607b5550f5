#include "app/mocker/other_routes.hpp"

#include <array>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "core/media/base64.hpp"
#include "core/common/json_parse.hpp"

namespace kvr::mocker {
namespace {

using json = nlohmann::json;

route_answer bad_request(std::string_view why) { return {400, "application/json", error_json(why, "BadRequestError", 400)}; }

/// A deterministic 8-dimensional embedding of `text` (its bytes folded into the dimensions):
/// floats, or with `encoding_format: "base64"` their little-endian float32 bytes in base64, as
/// vLLM answers.
json embedding_of(std::string_view text, bool base64) {
  std::array<float, 8> v{};
  for (std::size_t i = 0; i < text.size(); ++i) v[i % 8] += static_cast<float>(static_cast<unsigned char>(text[i]) / 255.0);
  if (!base64) return json(v);
  std::array<std::uint8_t, sizeof v> bytes{};
  std::memcpy(bytes.data(), v.data(), sizeof v);  // x86-64 and every engine host: little-endian
  return base64_encode(bytes);
}

route_answer embeddings(const json& body, const std::string& model) {
  const auto input = body.find("input");
  if (input == body.end()) return bad_request("input is required");
  const bool base64 = body.value("encoding_format", std::string("float")) == "base64";
  std::vector<std::string> texts;
  if (input->is_string()) texts.push_back(input->get<std::string>());
  else if (input->is_array())
    for (const json& item : *input) texts.push_back(item.is_string() ? item.get<std::string>() : item.dump());
  else return bad_request("input must be a string or an array");
  json data = json::array();
  std::size_t tokens = 0;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", embedding_of(texts[i], base64)}});
    tokens += texts[i].size() / 4 + 1;
  }
  return {200, "application/json",
          json{{"object", "list"}, {"data", data}, {"model", model}, {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}}.dump()};
}

route_answer tokenize(const json& body, std::string_view raw, const prompt_tokenizer& prompts, std::uint32_t max_model_len) {
  auto parsed = prompts.parse(raw, body.contains("messages"));
  if (!parsed) return bad_request(parsed.error());
  return {200, "application/json",
          json{{"tokens", parsed->prompt}, {"count", parsed->prompt.size()}, {"max_model_len", max_model_len}}.dump()};
}

/// `/v1/responses`: one output message; streamed as the Responses API's server-sent events.
route_answer responses(const json& body, const std::string& model) {
  const std::string text = "mock response";
  const json message = {{"id", "msg_mock"}, {"type", "message"}, {"role", "assistant"}, {"status", "completed"},
                        {"content", {{{"type", "output_text"}, {"text", text}, {"annotations", json::array()}}}}};
  json response = {{"id", "resp_mock"}, {"object", "response"}, {"created_at", 0}, {"model", model},
                   {"status", "completed"}, {"output", {message}}, {"usage", {{"input_tokens", 1}, {"output_tokens", 2}, {"total_tokens", 3}}}};
  if (!body.value("stream", false)) return {200, "application/json", response.dump()};
  std::string events;
  int sequence = 0;
  auto event = [&](std::string_view type, json data) {
    data["type"] = type;
    data["sequence_number"] = sequence++;
    events += fmt::format("event: {}\ndata: {}\n\n", type, data.dump());
  };
  json in_progress = response;
  in_progress["status"] = "in_progress";
  in_progress["output"] = json::array();
  event("response.created", {{"response", in_progress}});
  event("response.output_text.delta", {{"item_id", "msg_mock"}, {"output_index", 0}, {"content_index", 0}, {"delta", "mock "}});
  event("response.output_text.delta", {{"item_id", "msg_mock"}, {"output_index", 0}, {"content_index", 0}, {"delta", "response"}});
  event("response.output_text.done", {{"item_id", "msg_mock"}, {"output_index", 0}, {"content_index", 0}, {"text", text}});
  event("response.completed", {{"response", response}});
  return {200, "text/event-stream", std::move(events)};
}

/// `/v1/messages` (Anthropic's shape, as vLLM serves it).
route_answer messages(const std::string& model) {
  return {200, "application/json",
          json{{"id", "msg_mock"}, {"type", "message"}, {"role", "assistant"}, {"model", model},
               {"content", {{{"type", "text"}, {"text", "mock message"}}}}, {"stop_reason", "end_turn"},
               {"usage", {{"input_tokens", 1}, {"output_tokens", 2}}}}.dump()};
}

json x_headers_json(const other_request& request) {
  json out = json::object();
  for (const auto& [name, value] : request.x_headers) out[name] = value;
  return out;
}

}  // namespace

static route_answer answer_other_route_or_throw(const other_request& request, const std::string& model,
                                                const prompt_tokenizer& prompts, std::uint32_t max_model_len);

route_answer answer_other_route(const other_request& request, const std::string& model, const prompt_tokenizer& prompts,
                                std::uint32_t max_model_len) {
  try {
    return answer_other_route_or_throw(request, model, prompts, max_model_len);
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong type: the client's error
    return bad_request(e.what());
  }
}

static route_answer answer_other_route_or_throw(const other_request& request, const std::string& model,
                                                const prompt_tokenizer& prompts, std::uint32_t max_model_len) {
  const bool post = request.method == "POST";
  const bool served = post && (request.path == "/v1/embeddings" || request.path == "/tokenize" ||
                               request.path == "/v1/responses" || request.path == "/v1/messages");
  // Engines read a JSON body whatever its Content-Type says (clients often send none).
  const json body = served ? parse_plain_json(request.body) : json();
  if (served && !body.is_object()) return bad_request("the body is not a JSON object");
  if (post && request.path == "/v1/embeddings") return embeddings(body, model);
  if (post && request.path == "/tokenize") return tokenize(body, request.body, prompts, max_model_len);
  if (post && request.path == "/v1/responses") return responses(body, model);
  if (post && request.path == "/v1/messages") return messages(model);
  // Anything else: what arrived, so a test can compare it with what it sent.
  return {200, "application/json",
          json{{"echo",
                {{"method", request.method},
                 {"target", request.target},
                 {"content_type", request.content_type},
                 {"headers", x_headers_json(request)},
                 {"body_bytes", request.body.size()},
                 {"body_xxh3", fmt::format("{:016x}", XXH3_64bits(request.body.data(), request.body.size()))},
                 {"body", std::string(request.body)}}}}
              .dump(-1, ' ', false, json::error_handler_t::replace)};
}

}  // namespace kvr::mocker
