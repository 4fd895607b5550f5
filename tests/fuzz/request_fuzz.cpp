// libFuzzer target: arbitrary bytes as a chat, completion, /generate, pass-through and multipart
// upload request body (read in full, and as the envelope sets that read no prompt take), through what
// kvrouter does with a body before it reaches a worker: the shape check, the routing inputs (the
// token-id shortcut held to the full parse), the prompt plan, the chat template (ChatML, with
// tools and kwargs; its JSON read through simdjson, held to nlohmann's own parser) and the Qwen3
// tokenizer.
// Whatever the bytes, each step returns a value or an error; ASan, UBSan and -malloc_limit_mb
// catch the rest (deep nesting included: a body the shape check passes is walked recursively).
// The bytes, as text, are also split by the hand-written pre-tokenizer of each known pattern
// and by PCRE2: a difference aborts (tests/support/pcre2_pieces.hpp).
//
// Structure-aware mode: an input that starts with byte 0x01 is not a body but the makings of
// one. Its second byte chooses where the rest goes, as a string inside a valid chat body: a tool
// call's `arguments` (which the chat template parses as JSON, as vLLM does), a `response_format`
// schema, a tool's `parameters`, a message's content, a `chat_template_kwargs` value or a
// /tokenize chat. So the mutations land inside strings that are parsed later, behind a body that
// always parses (issue 40's crash lived there). tests/fuzz/request.dict holds the JSON and
// OpenAI tokens; tests/fuzz/corpus/request/ what the 30-minute run found.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/common/json_parse.hpp"
#include "core/common/multipart.hpp"
#include "core/prompt/api_translation.hpp"
#include "core/prompt/chat_template.hpp"
#include "core/prompt/jinja/json_value.hpp"
#include "core/prompt/openai.hpp"
#include "core/prompt/pretokenizer.hpp"
#include "core/prompt/prompt_plan.hpp"
#include "core/prompt/token_id_array.hpp"
#include "core/prompt/tokenize_api.hpp"
#include "core/prompt/tokenizer.hpp"
#include "tests/support/pcre2_pieces.hpp"

namespace {

const kvr::chat_template& chatml() {
  static const kvr::chat_template chat = *kvr::chat_template::load(KVR_SOURCE_DIR "/tests/data/chat_templates/chatml.jinja");
  return chat;
}

kvr::tokenizer& qwen3() {
  static kvr::tokenizer t = *kvr::tokenizer::load(KVR_SOURCE_DIR "/.cache/tokenizers/qwen3/tokenizer.json");
  return t;
}

/// The pre-tokenizer and PCRE2 split `text` alike under every known pattern.
void check_pieces(std::string_view text) {
  if (!kvr::valid_utf8(text) || !kvr::testing::classes_agree_with_pcre2(text)) return;
  for (const auto pattern : {kvr::split_pattern::qwen2, kvr::split_pattern::llama3, kvr::split_pattern::gpt2}) {
    const std::string_view regex = kvr::split_regex(pattern);
    if (kvr::testing::builtin_piece_ends(pattern, text) != kvr::testing::pcre2_piece_ends(regex, text)) {
      std::fprintf(stderr, "pre-tokenizer and PCRE2 split differently under %.*s\n", static_cast<int>(regex.size()), regex.data());
      std::abort();
    }
  }
}

/// A valid chat body with `inner` as the string at the place `where` chooses (structure-aware mode).
std::string structured_body(std::uint8_t where, std::string_view inner) {
  using json = nlohmann::json;
  const std::string text(inner);
  json user = {{"role", "user"}, {"content", "hi"}};
  json body = {{"model", "m"}, {"messages", json::array({user})}};
  switch (where % 6) {
    case 0:
    case 5:
      body["messages"].push_back({{"role", "assistant"},
                                  {"content", ""},
                                  {"tool_calls", {{{"id", "c"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", text}}}}}}});
      body["messages"].push_back(user);
      if (where % 6 == 5) body["prompt"] = "tokenize";  // also read as a /tokenize chat
      break;
    case 1: body["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "s"}, {"schema", text}}}}; break;
    case 2: body["tools"] = {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", text}}}}}; break;
    case 3: body["messages"][0]["content"] = text; break;
    case 4: body["chat_template_kwargs"] = {{"x", text}}; break;
  }
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

void exercise(std::string_view bytes_in);

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (size >= 2 && data[0] == 0x01) exercise(structured_body(data[1], input.substr(2)));
  else exercise(input);
  return 0;
}

namespace {

/// Whether `json` holds an integer above INT64_MAX anywhere (depth bounded by the shape scan).
bool holds_wide_unsigned(const nlohmann::ordered_json& json, int level) {
  if (level > 600) return false;
  if (json.is_number_unsigned()) return json.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX);
  if (json.is_structured())
    for (const auto& item : json)
      if (holds_wide_unsigned(item, level + 1)) return true;
  return false;
}

void exercise(std::string_view bytes_in) {
  static kvr::request_parser parser;
  const auto* data = reinterpret_cast<const std::uint8_t*>(bytes_in.data());
  const std::size_t size = bytes_in.size();
  check_pieces(bytes_in);
  std::string body(bytes_in);
  body.reserve(size + kvr::request_parser::padding);
  // nlohmann reads a NUL byte as the end of its input; JSON text never holds one raw.
  const bool holds_nul = bytes_in.find('\0') != std::string_view::npos;
  const bool valid_json = !holds_nul && nlohmann::json::accept(std::string_view(body.data(), size));
  for (auto endpoint : {kvr::api_endpoint::chat_completions, kvr::api_endpoint::completions, kvr::api_endpoint::generate,
                        kvr::api_endpoint::other}) {
    // The envelope's fields, copied out: the full parse below reuses the parser's buffers.
    std::optional<std::tuple<std::string, bool, std::string>> envelope;
    if (auto read = parser.parse_envelope(endpoint, std::string_view(body.data(), size), body.capacity()))
      envelope.emplace(std::string(read->model), read->stream, std::string(read->user));
    auto walked = parser.parse_walking(endpoint, std::string_view(body.data(), size), body.capacity());
    auto request = parser.parse(endpoint, std::string_view(body.data(), size), body.capacity());
    // parse's shortcut for token-id prompts reads a valid body as the full walk does, or refuses
    // it with the same words.
    if (valid_json && (walked.has_value() != request.has_value() ||
                       (request && (walked->model != request->model || walked->stream != request->stream ||
                                    walked->user != request->user || walked->prompt_token_ids != request->prompt_token_ids ||
                                    walked->prompt_text != request->prompt_text ||
                                    walked->prompt_tokens != request->prompt_tokens)) ||
                       (!request && walked.error().message != request.error().message))) {
      std::fprintf(stderr, "the token-id shortcut disagrees with the full parse\n");
      std::abort();
    }
    if (!request) continue;
    // A valid JSON body the full parse accepts, the envelope's scan accepts too, and reads the
    // same. (On invalid JSON the two may differ: simdjson leaves values it skips unchecked, the
    // scan checks the top level's syntax; either answer is a worker's or a 400.)
    if (valid_json && (!envelope || std::get<0>(*envelope) != request->model ||
                       std::get<1>(*envelope) != request->stream || std::get<2>(*envelope) != request->user)) {
      std::fprintf(stderr, "the envelope disagrees with the full parse\n");
      std::abort();
    }
    const auto plan = kvr::plan_prompt(*request, {.tokenizer = true, .chat = true, .images = true});
    std::vector<std::uint32_t> tokens;
    if (plan.path == kvr::prompt_path::chat) {
      auto rendered = chatml().render({.messages_json = request->chat.messages_json,
                                       .tools_json = request->chat.tools_json,
                                       .template_kwargs_json = request->chat.template_kwargs_json,
                                       .add_generation_prompt = request->chat.add_generation_prompt});
      if (rendered) qwen3().encode(*rendered, tokens);
    } else if (plan.path == kvr::prompt_path::text) {
      qwen3().encode(request->prompt_text, tokens);
    }
  }
  // As /v1/responses and /v1/messages bodies, translated into the chat they render as: the
  // translation copies strings as written, so a valid body gives a valid chat, which the chat
  // parser reads.
  for (auto translate : {&kvr::responses_as_chat, &kvr::messages_as_chat}) {
    auto chat = translate(std::string_view(body.data(), size), body.capacity());
    if (!chat) continue;
    if (valid_json && !nlohmann::json::accept(*chat)) {
      std::fprintf(stderr, "a valid body translated to a chat that is not JSON\n");
      std::abort();
    }
    const std::size_t chat_size = chat->size();
    chat->reserve(chat_size + kvr::request_parser::padding);
    auto parsed = parser.parse(kvr::api_endpoint::chat_completions, std::string_view(chat->data(), chat_size), chat->capacity());
    if (valid_json && !parsed && parsed.error().code == kvr::api_errc::invalid_json) {
      std::fprintf(stderr, "a translated chat the chat parser cannot read: %s\n", parsed.error().message.c_str());
      std::abort();
    }
  }
  // As /tokenize and /detokenize bodies, answered with the set's tokenizer and template.
  (void)kvr::tokenize_needs_engine(std::string_view(body.data(), size));
  (void)kvr::answer_tokenize(std::string_view(body.data(), size), qwen3(), &chatml(), false);
  (void)kvr::answer_detokenize(std::string_view(body.data(), size), qwen3());
  // As an upload (multipart/form-data): its first line the Content-Type, the rest the body.
  const std::string_view bytes(body.data(), size);
  const std::size_t line = bytes.find('\n');
  if (line != std::string_view::npos) {
    const auto boundary = kvr::multipart_boundary(bytes.substr(0, line));
    (void)kvr::multipart_field(bytes.substr(line + 1), boundary ? *boundary : std::string_view("B"), "model");
  }
  // As JSON for the chat template: simdjson's reading into nlohmann's tree is nlohmann's own,
  // for one value within the depth bound. Text the shape scan refuses (too deep, or trailing
  // bytes) the bounded parser refuses unread, and text holding a raw NUL byte, which nlohmann
  // reads as the end of its input and so accepts with anything after it, is not JSON either.
  {
    const auto ours = kvr::parse_ordered_json(bytes);
    if (!kvr::scan_json_shape(bytes) || holds_nul) {
      if (!ours.is_discarded()) {
        std::fprintf(stderr, "parse_ordered_json read what is not JSON text\n");
        std::abort();
      }
    } else {
      const auto theirs = nlohmann::ordered_json::parse(bytes, nullptr, false);
      if (ours.is_discarded() != theirs.is_discarded() || (!theirs.is_discarded() && ours.dump() != theirs.dump())) {
        std::fprintf(stderr, "parse_ordered_json disagrees with nlohmann's parser\n");
        std::abort();
      }
      // The chat template's own reader (JSON text straight into template values) reads what
      // nlohmann reads, as the tree converted: the same values, printed as `tojson` prints
      // them. (An integer past 63 bits is a float to the reader, wrapped by the conversion.)
      const auto values = kvr::jinja::value_from_json_text(bytes);
      if (values.has_value() != !theirs.is_discarded() ||
          (values && !holds_wide_unsigned(theirs, 0) &&
           kvr::jinja::to_json_text(*values) != kvr::jinja::to_json_text(kvr::jinja::value::from_json(theirs)))) {
        std::fprintf(stderr, "value_from_json_text disagrees with nlohmann's parser\n");
        std::abort();
      }
    }
  }
  // As a prompt's value: the token-id reader takes only arrays of integers, each as written.
  std::vector<std::uint32_t> ids;
  if (kvr::read_token_id_array(bytes, ids)) {
    const auto json = nlohmann::json::parse(bytes, nullptr, false);
    if (json.is_discarded() || !json.is_array() || json.size() != ids.size()) std::abort();
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (!json[i].is_number_unsigned() || json[i].get<std::uint64_t>() != ids[i]) std::abort();
  }
  // The tokenizer on the raw bytes too (invalid UTF-8 included).
  std::vector<std::uint32_t> raw_tokens;
  qwen3().encode(std::string_view(reinterpret_cast<const char*>(data), size), raw_tokens);
}

}  // namespace
