#include "core/prompt/tokenize_api.hpp"

#include <charconv>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/common/json_parse.hpp"
#include "core/common/json_top_level.hpp"
#include "core/prompt/token_id_array.hpp"

namespace kvr {
namespace {

using json = nlohmann::json;

std::unexpected<api_error> invalid(std::string message, std::string param = {}) {
  return std::unexpected(api_error{api_errc::invalid_request, std::move(message), std::move(param)});
}

/// A body's top-level members, read without building a tree of it: its nesting is bounded
/// first, its object syntax read strictly; the values are the bytes as sent.
class body_members {
 public:
  static std::expected<body_members, api_error> of(std::string_view body) {
    if (const auto shape = scan_json_shape(body); !shape && shape.error() == json_shape_error::too_deep)
      return std::unexpected(api_error{api_errc::invalid_request,
                                       fmt::format("the body is refused: it {}", describe(json_parse_error::too_deep)), {}});
    body_members out;
    if (!scan_top_level_members(body, out.members_))
      return std::unexpected(api_error{api_errc::invalid_json, "the body is not a JSON object", {}});
    return out;
  }

  /// The value of member `key` (the last one when repeated, as JSON parsers keep); none when it
  /// is missing or null.
  [[nodiscard]] std::optional<std::string_view> find(std::string_view key) const {
    std::optional<std::string_view> found;
    for (const json_member& m : members_)
      if (key_is(m.raw_key, key)) found = m.value;
    if (found && *found == "null") return std::nullopt;
    return found;
  }

 private:
  static bool key_is(std::string_view raw_key, std::string_view key) {
    if (raw_key.find('\\') == std::string_view::npos) return raw_key.substr(1, raw_key.size() - 2) == key;
    const json decoded = parse_plain_json(raw_key);  // a key written with escapes
    return decoded.is_string() && decoded.get_ref<const std::string&>() == key;
  }

  std::vector<json_member> members_;
};

std::expected<bool, api_error> flag(const body_members& body, const char* key, bool fallback) {
  const auto raw = body.find(key);
  if (!raw) return fallback;
  if (*raw != "true" && *raw != "false") return invalid(fmt::format("{} must be true or false", key), key);
  return *raw == "true";
}

/// A member that must be a JSON string, unescaped.
std::expected<std::string, api_error> string_member(std::string_view raw, const char* key) {
  if (raw.empty() || raw.front() != '"') return invalid(fmt::format("{} must be a string", key), key);
  json decoded = parse_plain_json(raw);
  if (!decoded.is_string()) return invalid(fmt::format("{} must be a string", key), key);
  return std::move(decoded.get_ref<std::string&>());
}

std::unexpected<api_error> too_long(std::size_t max_tokens, const char* param) {
  return invalid(fmt::format("the prompt is longer than the {} tokens this router accepts", max_tokens), param);
}

std::expected<void, api_error> tokenize_chat(const body_members& body, std::string_view messages, tokenizer& text,
                                             const chat_template* chat, bool plain_fallback, std::size_t max_tokens,
                                             std::vector<std::uint32_t>& tokens) {
  if (messages.front() != '[') return invalid("messages must be an array", "messages");
  const auto generation = flag(body, "add_generation_prompt", true);
  if (!generation) return std::unexpected(generation.error());
  const auto tools = body.find("tools");
  const auto kwargs = body.find("chat_template_kwargs");
  const chat_render_inputs inputs{.messages_json = messages,
                                  .tools_json = tools && tools->front() == '[' ? *tools : std::string_view(),
                                  .template_kwargs_json = kwargs && kwargs->front() == '{' ? *kwargs : std::string_view(),
                                  .add_generation_prompt = *generation};
  if (chat == nullptr && !plain_fallback) return invalid("this model has no chat template to render messages with", "messages");
  auto rendered = chat ? chat->render(inputs) : chat_template::render_plain(inputs);
  if (!rendered && !rendered.error().refused_field.empty()) return invalid(rendered.error().message, rendered.error().refused_field);
  if (!rendered) return invalid(fmt::format("the chat template cannot render these messages: {}", rendered.error().message), "messages");
  text.encode(*rendered, tokens, max_tokens);
  return {};
}

/// A completion's prompt: a string, or (`completion_prompts`) token ids or an array of one string.
/// `ids_as_given` is set for a prompt of token ids, which the engine takes as they are (no
/// special tokens added).
std::expected<void, api_error> tokenize_prompt(std::string_view prompt, tokenizer& text, const prompt_reading& reading,
                                               std::vector<std::uint32_t>& tokens, bool& ids_as_given) {
  if (reading.completion_prompts && prompt.front() == '[') {
    ids_as_given = read_token_id_array(prompt, tokens);
    if (ids_as_given) return {};
    tokens.clear();
    const json parsed = parse_plain_json(prompt);
    if (!parsed.is_array() || parsed.size() != 1 || !parsed[0].is_string())
      return invalid("prompt must be a string, token ids, or an array of one string", "prompt");
    text.encode(parsed[0].get_ref<const std::string&>(), tokens, reading.max_tokens);
    return {};
  }
  auto decoded = string_member(prompt, "prompt");
  if (!decoded) return std::unexpected(decoded.error());
  text.encode(*decoded, tokens, reading.max_tokens);
  return {};
}

void append_number(std::string& out, std::uint64_t n) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, n).ptr;
  out.append(digits, end);
}

}  // namespace

bool tokenize_needs_engine(std::string_view body) {
  const auto members = body_members::of(body);  // refused by answer_tokenize if not an object or too deep
  return members && members->find("return_token_strs") == "true";
}

std::expected<std::vector<std::uint32_t>, api_error> prompt_token_ids(std::string_view body, tokenizer& text, const chat_template* chat,
                                                                      bool plain_fallback, const prompt_reading& reading) {
  const auto members = body_members::of(body);
  if (!members) return std::unexpected(members.error());
  std::vector<std::uint32_t> tokens;
  const auto messages = members->find("messages");
  const auto prompt = messages ? std::nullopt : members->find("prompt");
  if (!messages && !prompt) return invalid("give prompt or messages", "prompt");
  const char* param = messages ? "messages" : "prompt";
  // vLLM's defaults: a chat's template writes its special tokens; a prompt gets the tokenizer's.
  const auto add_special = flag(*members, "add_special_tokens", !messages);
  if (!add_special) return std::unexpected(add_special.error());
  bool ids_as_given = false;
  const auto read = messages ? tokenize_chat(*members, *messages, text, chat, plain_fallback, reading.max_tokens, tokens)
                             : tokenize_prompt(*prompt, text, reading, tokens, ids_as_given);
  if (!read) return std::unexpected(read.error());
  if (*add_special && !ids_as_given) {
    const auto& affixes = text.added_special_tokens();
    tokens.insert(tokens.begin(), affixes.prefix.begin(), affixes.prefix.end());
    tokens.insert(tokens.end(), affixes.suffix.begin(), affixes.suffix.end());
  }
  if (tokens.size() > reading.max_tokens) return too_long(reading.max_tokens, param);
  return tokens;
}

std::expected<std::string, api_error> answer_tokenize(std::string_view body, tokenizer& text, const chat_template* chat,
                                                      bool plain_fallback, std::size_t max_tokens) {
  const auto tokens = prompt_token_ids(body, text, chat, plain_fallback, {.max_tokens = max_tokens});
  if (!tokens) return std::unexpected(tokens.error());
  // Written directly: an id is at most 11 bytes, where a JSON tree of them took about 40.
  std::string out;
  out.reserve(48 + tokens->size() * 7);
  out += R"({"count":)";
  append_number(out, tokens->size());
  out += R"(,"tokens":[)";
  for (std::size_t i = 0; i < tokens->size(); ++i) {
    if (i > 0) out += ',';
    append_number(out, (*tokens)[i]);
  }
  out += R"(],"token_strs":null})";
  return out;
}

std::expected<std::string, api_error> answer_detokenize(std::string_view body, const tokenizer& text) {
  const auto members = body_members::of(body);
  if (!members) return std::unexpected(members.error());
  const auto raw = members->find("tokens");
  if (!raw || raw->front() != '[') return invalid("tokens must be an array of token ids", "tokens");
  std::vector<std::uint32_t> ids;
  if (!read_token_id_array(*raw, ids)) {  // not the plain form (or empty): read it whole, to say what is wrong
    ids.clear();
    const json parsed = parse_plain_json(*raw);
    if (!parsed.is_array()) return invalid("tokens must be an array of token ids", "tokens");
    for (const json& id : parsed) {
      if (!id.is_number_unsigned() || id.get<std::uint64_t>() >= text.vocab_size())
        return invalid(fmt::format("token id {} is not in the vocabulary (0..{})", id.dump(), text.vocab_size() - 1), "tokens");
      ids.push_back(id.get<std::uint32_t>());
    }
  }
  for (const std::uint32_t id : ids)
    if (id >= text.vocab_size())
      return invalid(fmt::format("token id {} is not in the vocabulary (0..{})", id, text.vocab_size() - 1), "tokens");
  auto decoded = text.decode(ids);
  if (!decoded) return invalid("a token id is not in the vocabulary", "tokens");
  return json{{"prompt", *decoded}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace kvr
