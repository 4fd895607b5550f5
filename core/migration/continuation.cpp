#include "core/migration/continuation.hpp"

#include <algorithm>
#include <array>

#include <nlohmann/json.hpp>

#include "core/common/json_parse.hpp"
#include "core/common/json_top_level.hpp"

namespace kvr {
namespace {

using json = nlohmann::json;
/// What kvrouter writes keeps OpenAI's member order (id, object, created, model, choices).
using ojson = nlohmann::ordered_json;

[[nodiscard]] const json* member(const json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

[[nodiscard]] bool above_one(const json* value) { return value && value->is_number() && value->get<double>() > 1; }

/// Sampling and stopping parameters the continuation keeps as the client sent them (vLLM's and
/// OpenAI's names). `max_tokens` and `min_tokens` are lowered instead; the rest (messages,
/// tools, `stream`) is the first worker's business or rebuilt.
constexpr std::array kept_parameters{
    "temperature",      "top_p",          "top_k",          "min_p",
    "seed",             "stop",           "stop_token_ids", "presence_penalty",
    "frequency_penalty", "repetition_penalty", "length_penalty", "ignore_eos",
    "skip_special_tokens", "spaces_between_special_tokens", "include_stop_str_in_output", "logit_bias",
    "bad_words",        "allowed_token_ids", "user",       "priority",
};

}  // namespace

std::string_view to_string(migration_refusal why) {
  switch (why) {
    case migration_refusal::several_choices: return "several_choices";
    case migration_refusal::logprobs: return "logprobs";
    case migration_refusal::structured_output: return "structured_output";
    case migration_refusal::tool_call: return "tool_call";
    case migration_refusal::unreadable_stream: return "unreadable_stream";
    case migration_refusal::no_token_ids: return "no_token_ids";
    case migration_refusal::too_long: return "too_long";
    case migration_refusal::limit_reached: return "limit_reached";
    case migration_refusal::no_worker: return "no_worker";
    case migration_refusal::count: break;
  }
  return "unknown";
}

std::optional<migration_refusal> refuses_migration(const json& body) {
  if (!body.is_object()) return migration_refusal::unreadable_stream;
  if (above_one(member(body, "n")) || above_one(member(body, "best_of"))) return migration_refusal::several_choices;
  if (const json* logprobs = member(body, "logprobs"); logprobs && !(logprobs->is_boolean() && !logprobs->get<bool>()))
    return migration_refusal::logprobs;
  if (member(body, "top_logprobs") || member(body, "prompt_logprobs")) return migration_refusal::logprobs;
  if (const json* format = member(body, "response_format"); format && format->is_object()) {
    const json* type = member(*format, "type");
    if (!(type && type->is_string() && type->get_ref<const std::string&>() == "text")) return migration_refusal::structured_output;
  }
  for (const char* guided : {"guided_json", "guided_regex", "guided_choice", "guided_grammar", "structured_outputs"})
    if (member(body, guided)) return migration_refusal::structured_output;
  return std::nullopt;
}

bool whole_answer_can_be_followed(std::string_view body) {
  std::vector<json_member> members;
  if (!scan_top_level_members(body, members)) return false;
  // Only the members the rules read are parsed, each from its own bytes.
  static constexpr std::array ruled{"n", "best_of", "logprobs", "top_logprobs", "prompt_logprobs", "response_format",
                                    "guided_json", "guided_regex", "guided_choice", "guided_grammar", "structured_outputs"};
  json read = json::object();
  for (const json_member& m : members) {
    const std::string_view key = m.raw_key.substr(1, m.raw_key.size() - 2);
    if (key.find('\\') != std::string_view::npos) return false;  // a key spelled with escapes: not followed
    if (key == "echo" && m.value == "true") return false;  // the prompt's text opens the answer
    if ((key == "tools" || key == "functions") && m.value != "null" && m.value != "[]") return false;  // tool calls may come
    if (std::find(ruled.begin(), ruled.end(), key) == ruled.end()) continue;
    read[std::string(key)] = parse_plain_json(m.value);
    if (read[std::string(key)].is_discarded()) return false;
  }
  return !refuses_migration(read);
}

std::optional<std::int64_t> tokens_left(const json& body, bool chat, std::uint32_t generated) {
  const json* limit = chat && member(body, "max_completion_tokens") ? member(body, "max_completion_tokens") : member(body, "max_tokens");
  // A completion without `max_tokens` stops at 16 tokens (OpenAI's and vLLM's default); a chat
  // at the model's length.
  std::int64_t total = 16;
  if (limit && limit->is_number_integer()) total = limit->get<std::int64_t>();
  else if (chat) return std::nullopt;
  return total - static_cast<std::int64_t>(generated);
}

std::expected<continuation, migration_refusal> continue_answer(const json& body, const answer_ledger& ledger,
                                                               std::uint32_t max_seq_len) {
  if (auto refused = refuses_migration(body)) return std::unexpected(*refused);
  if (ledger.unreadable()) return std::unexpected(migration_refusal::unreadable_stream);  // an error event is the worker's failure, not the answer's
  if (ledger.tool_call_started()) return std::unexpected(migration_refusal::tool_call);
  if (ledger.prompt_ids().empty() || !ledger.ids_complete()) return std::unexpected(migration_refusal::no_token_ids);
  const auto generated = static_cast<std::uint32_t>(ledger.generated_ids().size());
  continuation next;
  next.carried_tokens = generated;
  const auto left = tokens_left(body, ledger.chat(), generated);
  if (left && *left <= 0) return next;  // nothing left to generate
  const std::size_t prompt_length = ledger.prompt_ids().size() + generated;
  if (max_seq_len > 0 && prompt_length > max_seq_len) return std::unexpected(migration_refusal::too_long);

  ojson request = ojson::object();
  const json* model = member(body, "model");
  request["model"] = model && model->is_string() ? model->get<std::string>() : ledger.model();
  ojson prompt = ojson::array();
  for (const std::uint32_t id : ledger.prompt_ids()) prompt.push_back(id);
  for (const std::uint32_t id : ledger.generated_ids()) prompt.push_back(id);
  request["prompt"] = std::move(prompt);
  if (left) request["max_tokens"] = *left;
  for (const char* key : kept_parameters)
    if (const json* value = member(body, key)) request[key] = ojson::parse(value->dump());
  if (const json* min_tokens = member(body, "min_tokens"); min_tokens && min_tokens->is_number_integer())
    request["min_tokens"] = std::max<std::int64_t>(0, min_tokens->get<std::int64_t>() - generated);
  request["stream"] = true;
  request["stream_options"] = {{"include_usage", true}};
  request["return_token_ids"] = true;
  next.body = request.dump();
  return next;
}

// -- the continuation's events ---------------------------------------------------------------

std::string continuation_relay::chunk(std::string_view text, const std::vector<std::uint32_t>* token_ids,
                                      const json& finish_reason, const json& stop_reason) const {
  ojson choice = {{"index", 0}};
  if (ledger_.chat()) choice["delta"] = text.empty() ? ojson::object() : ojson{{"content", text}};
  else choice["text"] = text;
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason.is_string() ? ojson(finish_reason.get<std::string>()) : ojson(nullptr);
  if (!ledger_.chat()) choice["stop_reason"] = stop_reason.is_number_unsigned() ? ojson(stop_reason.get<std::uint64_t>())
                                               : stop_reason.is_string()        ? ojson(stop_reason.get<std::string>())
                                                                                : ojson(nullptr);
  if (client_.token_ids && token_ids != nullptr) choice["token_ids"] = *token_ids;
  const ojson out = {{"id", ledger_.id()},
                    {"object", ledger_.chat() ? "chat.completion.chunk" : "text_completion"},
                    {"created", ledger_.created()},
                    {"model", ledger_.model()},
                    {"choices", ojson::array({std::move(choice)})}};
  return "data: " + out.dump() + "\n\n";
}

std::string continuation_relay::usage_chunk(std::int64_t completion_tokens) const {
  const auto prompt_tokens = static_cast<std::int64_t>(ledger_.prompt_ids().size());
  const ojson out = {{"id", ledger_.id()},
                     {"object", ledger_.chat() ? "chat.completion.chunk" : "text_completion"},
                     {"created", ledger_.created()},
                     {"model", ledger_.model()},
                     {"choices", ojson::array()},
                    {"usage",
                     {{"prompt_tokens", prompt_tokens},
                      {"completion_tokens", completion_tokens},
                      {"total_tokens", prompt_tokens + completion_tokens}}}};
  return "data: " + out.dump() + "\n\n";
}

continuation_relay::step continuation_relay::relay(std::string_view data) {
  step out;
  if (data == "[DONE]") {
    ledger_.mark_done();
    out.to_client = "data: [DONE]\n\n";
    return out;
  }
  const json event = parse_plain_json(data);
  if (!event.is_object() || member(event, "error")) {
    out.failed = true;
    return out;
  }
  if (const json* usage = member(event, "usage"); usage && usage->is_object()) {
    const json* completion = member(*usage, "completion_tokens");
    const std::int64_t continued = completion && completion->is_number_integer() ? completion->get<std::int64_t>() : 0;
    ledger_.mark_usage_sent();
    if (client_.usage) out.to_client += usage_chunk(carried_ + continued);
  }
  const json* choices = member(event, "choices");
  if (choices == nullptr || !choices->is_array()) return out;
  for (const json& choice : *choices) {
    if (!choice.is_object()) continue;
    const json* text = member(choice, "text");
    const std::string_view piece = text && text->is_string() ? std::string_view(text->get_ref<const std::string&>()) : "";
    const json* ids = member(choice, "token_ids");
    std::vector<std::uint32_t> new_ids;
    bool ids_known = ids && ids->is_array();
    if (ids_known)
      for (const json& id : *ids) {
        if (!id.is_number_unsigned() || id.get<std::uint64_t>() > UINT32_MAX) {
          ids_known = false;
          break;
        }
        new_ids.push_back(id.get<std::uint32_t>());
      }
    if (!ids_known) new_ids.clear();
    const json* finish = member(choice, "finish_reason");
    if (piece.empty() && new_ids.empty() && finish == nullptr) continue;  // e.g. the prompt's echo of ids
    ledger_.carry(piece, new_ids, ids_known || piece.empty());
    if (finish && finish->is_string()) ledger_.mark_finished(finish->get<std::string>());
    const json* stop = member(choice, "stop_reason");
    out.to_client += chunk(piece, ids_known ? &new_ids : nullptr, finish ? *finish : json(nullptr), stop ? *stop : json(nullptr));
  }
  return out;
}

std::string continuation_relay::finish(std::string_view reason) {
  ledger_.mark_finished(std::string(reason));
  std::string out = chunk("", nullptr, json(reason), json(nullptr));
  if (client_.usage) out += usage_chunk(carried_);
  ledger_.mark_done();
  return out + "data: [DONE]\n\n";
}

namespace {

[[nodiscard]] std::size_t skip_space(std::string_view text, std::size_t at) {
  while (at < text.size() && (text[at] == ' ' || text[at] == '\t' || text[at] == '\n' || text[at] == '\r')) ++at;
  return at;
}

/// The end of a token-id list's value starting at `at` (`[1, 2]` or `null`); none for any other value.
[[nodiscard]] std::optional<std::size_t> id_list_end(std::string_view text, std::size_t at) {
  if (text.substr(at, 4) == "null") return at + 4;
  if (at >= text.size() || text[at] != '[') return std::nullopt;
  for (std::size_t i = at + 1; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ']') return i + 1;
    const bool number_or_space = (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' ||
                                 c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
    if (!number_or_space) return std::nullopt;
  }
  return std::nullopt;
}

/// `without_token_ids` over the bytes, for the engines' shape: the members are cut out where
/// they are (the top level's `prompt_token_ids`, and `token_ids` / `prompt_token_ids` one
/// array and one object below it, where the choices are) and every other byte is kept. None
/// when the text strays from that shape (an escaped key, an id list that is not numbers):
/// then the tree decides.
[[nodiscard]] std::optional<std::string> cut_token_id_members(std::string_view data) {
  std::string out;
  out.reserve(data.size());
  std::size_t copied = 0;
  int depth = 0;
  for (std::size_t i = 0; i < data.size();) {
    const char c = data[i];
    if (c != '"') {
      if (c == '{' || c == '[') ++depth;
      else if (c == '}' || c == ']') --depth;
      ++i;
      continue;
    }
    const std::size_t start = i;
    bool escaped = false;
    for (++i; i < data.size() && data[i] != '"'; ++i)
      if (data[i] == '\\') {
        escaped = true;
        ++i;
      }
    if (i >= data.size()) return std::nullopt;
    const std::string_view name = data.substr(start + 1, i - start - 1);
    ++i;  // past the closing quote
    const std::size_t colon = skip_space(data, i);
    if (colon >= data.size() || data[colon] != ':') continue;  // a value, not a key
    const bool ids = (depth == 1 && name == "prompt_token_ids") || (depth == 3 && (name == "token_ids" || name == "prompt_token_ids"));
    if (escaped && (depth == 1 || depth == 3)) return std::nullopt;  // a key the bytes cannot be sure of
    if (!ids) continue;
    const auto end = id_list_end(data, skip_space(data, colon + 1));
    if (!end) return std::nullopt;
    out.append(data.substr(copied, start - copied));
    // One comma goes with the member: the one before it, or, for a first member, the one after.
    std::size_t kept = out.size();
    while (kept > 0 && (out[kept - 1] == ' ' || out[kept - 1] == '\t' || out[kept - 1] == '\n' || out[kept - 1] == '\r')) --kept;
    i = *end;
    if (kept > 0 && out[kept - 1] == ',') {
      out.resize(kept - 1);
    } else {
      const std::size_t next = skip_space(data, i);
      if (next < data.size() && data[next] == ',') i = next + 1;
    }
    copied = i;
  }
  out.append(data.substr(copied));
  return out;
}

}  // namespace

std::string without_token_ids(std::string_view data) {
  if (auto cut = cut_token_id_members(data)) return std::move(*cut);
  ojson event = parse_ordered_json(data);
  if (!event.is_object()) return std::string(data);
  event.erase("prompt_token_ids");
  if (auto choices = event.find("choices"); choices != event.end() && choices->is_array())
    for (ojson& choice : *choices)
      if (choice.is_object()) {
        choice.erase("token_ids");
        choice.erase("prompt_token_ids");
      }
  return event.dump();
}

}  // namespace kvr
