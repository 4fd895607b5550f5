#include "app/mocker/openai_mock.hpp"

#include "core/common/json_parse.hpp"
#include "core/prompt/mm_splice.hpp"

#include <array>

#include <nlohmann/json.hpp>
#include <xxhash.h>

namespace kvr::mocker {

namespace {

using json = nlohmann::json;

constexpr std::array<std::string_view, 16> spaced_words = {" the", " cache", " holds", " every", " block", " that",
                                                           " a", " prompt", " shares", " with", " its", " past",
                                                           " so", " routing", " saves", " time"};

std::int64_t created() { return 1767225600; }  // fixed: answers are reproducible byte for byte

}  // namespace

prompt_tokenizer::prompt_tokenizer(std::shared_ptr<const tokenizer> text, std::shared_ptr<const chat_template> chat,
                                   std::optional<multimodal_card> multimodal)
    : text_(std::move(text)), chat_(std::move(chat)), multimodal_(std::move(multimodal)),
      vocabulary_(greedy_vocabulary::of(text_.get())) {}

void prompt_tokenizer::expand_images(const nlohmann::json& messages, mock_request& out) const {
  std::vector<resolved_image> images;
  for (const json& message : messages) {
    const auto content = message.find("content");
    if (content == message.end() || !content->is_array()) continue;
    for (const json& part : *content) {
      if (!part.is_object() || part.value("type", "") != "image_url") continue;
      const json& image = part["image_url"];
      const std::string url = image.is_string() ? image.get<std::string>() : image.value("url", "");
      if (!url.starts_with("data:")) return;  // URL images stay one token: the mocker fetches nothing
      std::size_t bytes = 0;
      auto resolved = resolve_data_uri_image(url, *multimodal_, 64u << 20, bytes);
      if (!resolved) return;
      images.push_back(*resolved);
    }
  }
  if (images.empty()) return;
  if (!splice_images(out.prompt, multimodal_->image_token_id, images, out.images)) out.images.clear();
}

std::vector<std::uint32_t> prompt_tokenizer::tokenize(const std::string& text) const {
  std::vector<std::uint32_t> ids;
  if (text_) {
    tokenizer own = text_->share();
    own.encode(text, ids);
    return ids;
  }
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) ids.push_back(static_cast<std::uint32_t>(XXH3_64bits(text.data() + start, end - start) % 100000));
    start = end + 1;
  }
  return ids;
}

std::expected<mock_request, std::string> prompt_tokenizer::parse(std::string_view body, bool chat) const {
  const json request = parse_plain_json(body);
  if (request.is_discarded() || !request.is_object()) return std::unexpected("the body is not a JSON object");
  mock_request out;
  out.chat = chat;
  out.model = request.value("model", std::string("mock-model"));
  if (auto stream = request.find("stream"); stream != request.end() && stream->is_boolean()) out.stream = stream->get<bool>();
  if (auto ids = request.find("return_token_ids"); ids != request.end() && ids->is_boolean()) out.return_token_ids = ids->get<bool>();
  if (auto options = request.find("stream_options"); options != request.end() && options->is_object())
    out.include_usage = options->value("include_usage", false);
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (auto limit = request.find(key); limit != request.end() && limit->is_number_unsigned()) {
      const auto n = limit->get<std::uint64_t>();
      if (n == 0 || n > 1000000) return std::unexpected(std::string(key) + " must be from 1 to 1000000");
      out.max_tokens = static_cast<std::uint32_t>(n);
    }
  }
  if (auto params = request.find("kv_transfer_params"); params != request.end() && params->is_object()) {
    mock_request::transfer t;
    t.raw = params->dump();
    t.remote_decode = params->value("do_remote_decode", false) == true;
    t.remote_prefill = params->value("do_remote_prefill", false) == true;
    if (auto host = params->find("remote_host"); host != params->end() && host->is_string()) t.remote_host = host->get<std::string>();
    if (auto port = params->find("remote_port"); port != params->end() && port->is_number_unsigned() && port->get<std::uint64_t>() <= 65535)
      t.remote_port = port->get<std::uint16_t>();
    if (auto id = params->find("remote_request_id"); id != params->end() && id->is_string()) t.remote_request_id = id->get<std::string>();
    if (t.remote_prefill && (t.remote_host.empty() || t.remote_port == 0 || t.remote_request_id.empty()))
      return std::unexpected("kv_transfer_params: do_remote_prefill needs remote_host, remote_port and remote_request_id");
    out.kv_transfer = std::move(t);
  }
  if (auto room = request.find("bootstrap_room"); room != request.end() && !room->is_null()) {
    if (!room->is_number_unsigned()) return std::unexpected("bootstrap_room must be an integer (batched rooms are not simulated)");
    mock_request::bootstrap b;
    b.room = room->get<std::uint64_t>();
    if (auto host = request.find("bootstrap_host"); host != request.end() && host->is_string()) b.host = host->get<std::string>();
    if (auto port = request.find("bootstrap_port"); port != request.end() && port->is_number_unsigned() &&
                                                    port->get<std::uint64_t>() > 0 && port->get<std::uint64_t>() <= 65535)
      b.port = port->get<std::uint16_t>();
    if (b.host.empty() || b.port == 0) return std::unexpected("bootstrap_room needs bootstrap_host and bootstrap_port");
    out.sglang_bootstrap = std::move(b);
  }
  if (chat) {
    const auto messages = request.find("messages");
    if (messages == request.end() || !messages->is_array()) return std::unexpected("messages must be an array");
    const std::string messages_json = messages->dump();
    std::string tools_json, kwargs_json;
    if (auto tools = request.find("tools"); tools != request.end() && tools->is_array()) tools_json = tools->dump();
    if (auto kwargs = request.find("chat_template_kwargs"); kwargs != request.end() && kwargs->is_object())
      kwargs_json = kwargs->dump();
    const chat_render_inputs inputs{messages_json, tools_json, kwargs_json, request.value("add_generation_prompt", true)};
    auto rendered = chat_ ? chat_->render(inputs) : chat_template::render_plain(inputs);
    if (!rendered) return std::unexpected("chat template: " + rendered.error().message);
    out.prompt = tokenize(*rendered);
    if (multimodal_) expand_images(*messages, out);
  } else {
    const auto prompt = request.find("prompt");
    if (prompt == request.end()) return std::unexpected("prompt is required");
    if (prompt->is_string()) {
      out.prompt = tokenize(prompt->get<std::string>());
    } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number_unsigned()) {
      for (const json& id : *prompt) {
        if (!id.is_number_unsigned() || id.get<std::uint64_t>() > UINT32_MAX)
          return std::unexpected("prompt token ids must be integers in 0..2^32-1");
        out.prompt.push_back(id.get<std::uint32_t>());
      }
    } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_string()) {
      out.prompt = tokenize((*prompt)[0].get<std::string>());
    } else {
      return std::unexpected("prompt must be a string, an array of strings or an array of token ids");
    }
  }
  if (out.prompt.empty()) return std::unexpected("the prompt is empty");
  return out;
}

constexpr std::uint64_t fnv_offset = 1469598103934665603ull;
constexpr std::uint64_t fnv_prime = 1099511628211ull;
/// Generated tokens' ids without a tokenizer: one per word, from here up.
constexpr std::uint32_t first_word_id = 1000;

greedy_vocabulary greedy_vocabulary::of(const tokenizer* text) {
  greedy_vocabulary out;
  std::optional<tokenizer> own;
  if (text != nullptr) own.emplace(text->share());
  std::vector<std::uint32_t> ids;
  for (std::size_t i = 0; i < spaced_words.size(); ++i) {
    ids.clear();
    if (own) own->encode(spaced_words[i], ids);
    if (own && ids.size() != 1) continue;  // a word the tokenizer splits would not read back as one id
    out.ids.push_back(own ? ids[0] : static_cast<std::uint32_t>(first_word_id + i));
    out.words.push_back(spaced_words[i]);
  }
  if (out.ids.empty()) {  // a tokenizer that splits every word: fall back to the fixed ids
    for (std::size_t i = 0; i < spaced_words.size(); ++i) {
      out.ids.push_back(static_cast<std::uint32_t>(first_word_id + i));
      out.words.push_back(spaced_words[i]);
    }
  }
  return out;
}

greedy_answer::greedy_answer(const std::vector<std::uint32_t>& prompt, const greedy_vocabulary& vocabulary)
    : vocabulary_(&vocabulary), context_(fnv_offset) {
  for (const std::uint32_t id : prompt) context_ = (context_ ^ id) * fnv_prime;
}

greedy_answer::token greedy_answer::next() {
  const std::size_t word = (context_ >> 33) % vocabulary_->ids.size();
  const std::uint32_t id = vocabulary_->ids[word];
  context_ = (context_ ^ id) * fnv_prime;
  return {id, vocabulary_->words[word]};
}

std::string stream_chunk(const mock_request& request, std::uint64_t id, std::string_view text,
                         const std::vector<std::uint32_t>& token_ids, bool first, bool last) {
  json chunk;
  const json finish = last ? json("length") : json(nullptr);
  if (request.chat) {
    json delta = {{"content", text}};
    if (first) delta = {{"role", "assistant"}, {"content", text}};
    json choice = {{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", finish}};
    if (request.return_token_ids) choice["token_ids"] = token_ids;
    chunk = {{"id", "chatcmpl-" + std::to_string(id)},
             {"object", "chat.completion.chunk"},
             {"created", created()},
             {"model", request.model},
             {"choices", json::array({std::move(choice)})}};
    if (request.return_token_ids && first) chunk["prompt_token_ids"] = request.prompt;  // vLLM: on the first chunk
  } else {
    json choice = {{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish}, {"stop_reason", nullptr}};
    if (request.return_token_ids) {
      choice["token_ids"] = token_ids;
      if (first) choice["prompt_token_ids"] = request.prompt;  // vLLM: on the choice of the first chunk
    }
    chunk = {{"id", "cmpl-" + std::to_string(id)},
             {"object", "text_completion"},
             {"created", created()},
             {"model", request.model},
             {"choices", json::array({std::move(choice)})}};
  }
  return "data: " + chunk.dump() + "\n\n";
}

namespace {
json usage_of(const mock_request& request, std::uint32_t completion_tokens, std::optional<std::uint32_t> cached_tokens) {
  json usage = {{"prompt_tokens", request.prompt.size()},
                {"completion_tokens", completion_tokens},
                {"total_tokens", request.prompt.size() + completion_tokens}};
  if (cached_tokens) usage["prompt_tokens_details"] = {{"cached_tokens", *cached_tokens}};
  return usage;
}
}  // namespace

std::string usage_chunk(const mock_request& request, std::uint64_t id, std::uint32_t completion_tokens,
                        std::optional<std::uint32_t> cached_tokens) {
  const json chunk = {{"id", (request.chat ? "chatcmpl-" : "cmpl-") + std::to_string(id)},
                      {"object", request.chat ? "chat.completion.chunk" : "text_completion"},
                      {"created", created()},
                      {"model", request.model},
                      {"choices", json::array()},
                      {"usage", usage_of(request, completion_tokens, cached_tokens)}};
  return "data: " + chunk.dump() + "\n\n";
}

std::string final_body(const mock_request& request, std::uint64_t id, std::string_view text,
                       std::uint32_t completion_tokens, std::optional<std::uint32_t> cached_tokens) {
  const json usage = usage_of(request, completion_tokens, cached_tokens);
  if (request.chat)
    return json{{"id", "chatcmpl-" + std::to_string(id)},
                {"object", "chat.completion"},
                {"created", created()},
                {"model", request.model},
                {"choices", json::array({{{"index", 0},
                                          {"message", {{"role", "assistant"}, {"content", text}}},
                                          {"logprobs", nullptr},
                                          {"finish_reason", "length"}}})},
                {"usage", usage}}
        .dump();
  return json{{"id", "cmpl-" + std::to_string(id)},
              {"object", "text_completion"},
              {"created", created()},
              {"model", request.model},
              {"choices", json::array({{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", "length"},
                                        {"stop_reason", nullptr}}})},
              {"usage", usage}}
      .dump();
}

std::string error_json(std::string_view message, std::string_view type, int code) {
  return json{{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", code}}}}.dump();
}

}  // namespace kvr::mocker
