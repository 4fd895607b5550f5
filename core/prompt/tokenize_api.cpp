#include "core/prompt/tokenize_api.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/common/json_parse.hpp"

namespace kvr {
namespace {

using json = nlohmann::json;

std::unexpected<api_error> invalid(std::string message, std::string param = {}) {
  return std::unexpected(api_error{api_errc::invalid_request, std::move(message), std::move(param)});
}

/// The body as an object, its nesting bounded before anything walks it.
std::expected<json, api_error> parse_object(std::string_view body) {
  auto document = parse_json<json>(body);
  if (!document && document.error() == json_parse_error::too_deep)
    return std::unexpected(api_error{api_errc::invalid_request, fmt::format("the body is refused: it {}", describe(document.error())), {}});
  if (!document || !document->is_object())
    return std::unexpected(api_error{api_errc::invalid_json, "the body is not a JSON object", {}});
  return std::move(*document);
}

std::expected<bool, api_error> flag(const json& body, const char* key, bool fallback) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return invalid(fmt::format("{} must be true or false", key), key);
  return it->get<bool>();
}

}  // namespace

bool tokenize_needs_engine(std::string_view body) {
  const json document = parse_plain_json(body);  // refused by answer_tokenize if not JSON or too deep
  return document.is_object() && document.value("return_token_strs", false) == true;
}

std::expected<std::string, api_error> answer_tokenize(std::string_view body, tokenizer& text, const chat_template* chat,
                                                      bool plain_fallback) {
  auto document = parse_object(body);
  if (!document) return std::unexpected(document.error());
  const json& request = *document;
  std::vector<std::uint32_t> tokens;
  bool add_special = true;
  if (const auto messages = request.find("messages"); messages != request.end()) {
    if (!messages->is_array()) return invalid("messages must be an array", "messages");
    auto special = flag(request, "add_special_tokens", false);  // vLLM's default for chats: the template has them
    auto generation = flag(request, "add_generation_prompt", true);
    if (!special) return std::unexpected(special.error());
    if (!generation) return std::unexpected(generation.error());
    add_special = *special;
    const std::string messages_json = messages->dump();
    const auto tools = request.find("tools");
    const auto kwargs = request.find("chat_template_kwargs");
    const std::string tools_json = tools != request.end() && tools->is_array() ? tools->dump() : std::string();
    const std::string kwargs_json = kwargs != request.end() && kwargs->is_object() ? kwargs->dump() : std::string();
    const chat_render_inputs inputs{.messages_json = messages_json, .tools_json = tools_json,
                                    .template_kwargs_json = kwargs_json, .add_generation_prompt = *generation};
    if (chat == nullptr && !plain_fallback) return invalid("this model has no chat template to render messages with", "messages");
    auto rendered = chat ? chat->render(inputs) : chat_template::render_plain(inputs);
    if (!rendered && !rendered.error().refused_field.empty()) return invalid(rendered.error().message, rendered.error().refused_field);
    if (!rendered) return invalid(fmt::format("the chat template cannot render these messages: {}", rendered.error().message), "messages");
    text.encode(*rendered, tokens);
  } else if (const auto prompt = request.find("prompt"); prompt != request.end()) {
    if (!prompt->is_string()) return invalid("prompt must be a string", "prompt");
    auto special = flag(request, "add_special_tokens", true);
    if (!special) return std::unexpected(special.error());
    add_special = *special;
    text.encode(prompt->get_ref<const std::string&>(), tokens);
  } else {
    return invalid("give prompt or messages", "prompt");
  }
  if (add_special) {
    const auto& affixes = text.added_special_tokens();
    tokens.insert(tokens.begin(), affixes.prefix.begin(), affixes.prefix.end());
    tokens.insert(tokens.end(), affixes.suffix.begin(), affixes.suffix.end());
  }
  return json{{"count", tokens.size()}, {"tokens", tokens}, {"token_strs", nullptr}}.dump();
}

std::expected<std::string, api_error> answer_detokenize(std::string_view body, const tokenizer& text) {
  auto document = parse_object(body);
  if (!document) return std::unexpected(document.error());
  const auto tokens = document->find("tokens");
  if (tokens == document->end() || !tokens->is_array()) return invalid("tokens must be an array of token ids", "tokens");
  std::vector<std::uint32_t> ids;
  ids.reserve(tokens->size());
  for (const json& id : *tokens) {
    if (!id.is_number_unsigned() || id.get<std::uint64_t>() >= text.vocab_size())
      return invalid(fmt::format("token id {} is not in the vocabulary (0..{})", id.dump(), text.vocab_size() - 1), "tokens");
    ids.push_back(id.get<std::uint32_t>());
  }
  auto decoded = text.decode(ids);
  if (!decoded) return invalid("a token id is not in the vocabulary", "tokens");
  return json{{"prompt", *decoded}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace kvr
