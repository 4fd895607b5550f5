#include "core/migration/answer_ledger.hpp"

#include <nlohmann/json.hpp>

#include "core/common/json_parse.hpp"

namespace kvr {
namespace {

using json = nlohmann::json;

/// Appends `ids` (a JSON array of token ids) to `out`; false if it is not one.
bool append_ids(const json& ids, std::vector<std::uint32_t>& out) {
  if (!ids.is_array()) return false;
  for (const json& id : ids) {
    if (!id.is_number_unsigned() || id.get<std::uint64_t>() > UINT32_MAX) return false;
    out.push_back(id.get<std::uint32_t>());
  }
  return true;
}

[[nodiscard]] const json* member(const json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace

void answer_ledger::observe(std::string_view data) {
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  const json chunk = parse_plain_json(data);
  if (!chunk.is_object()) {
    unreadable_ = true;
    return;
  }
  if (member(chunk, "error") != nullptr) {
    engine_error_ = true;
    return;
  }
  if (!started_) {
    started_ = true;
    if (const json* id = member(chunk, "id"); id && id->is_string()) id_ = id->get<std::string>();
    if (const json* created = member(chunk, "created"); created && created->is_number_integer()) created_ = created->get<std::int64_t>();
    if (const json* model = member(chunk, "model"); model && model->is_string()) model_ = model->get<std::string>();
    if (const json* object = member(chunk, "object"); object && object->is_string())
      chat_ = object->get<std::string>() == "chat.completion.chunk";
  }
  if (const json* ids = member(chunk, "prompt_token_ids"); ids && prompt_ids_.empty() && !append_ids(*ids, prompt_ids_))
    prompt_ids_.clear();
  if (member(chunk, "usage") != nullptr) usage_seen_ = true;
  const json* choices = member(chunk, "choices");
  if (choices == nullptr || !choices->is_array()) return;
  for (const json& choice : *choices) {
    if (!choice.is_object()) continue;
    const json* index = member(choice, "index");
    if (index != nullptr && !(index->is_number_unsigned() && index->get<std::uint64_t>() == 0)) continue;
    if (const json* ids = member(choice, "prompt_token_ids"); ids && prompt_ids_.empty() && !append_ids(*ids, prompt_ids_))
      prompt_ids_.clear();
    if (member(choice, "logprobs") != nullptr) logprobs_seen_ = true;
    std::string_view piece;
    if (const json* delta = member(choice, "delta"); delta && delta->is_object()) {
      if (member(*delta, "role") != nullptr) role_sent_ = true;
      if (member(*delta, "tool_calls") != nullptr) tool_call_started_ = true;
      if (const json* content = member(*delta, "content"); content && content->is_string())
        piece = content->get_ref<const std::string&>();
      // Reasoning text is generated too: only its token ids can carry it into a continuation.
      for (const char* reasoning : {"reasoning_content", "reasoning"})
        if (const json* r = member(*delta, reasoning); r && r->is_string() && !r->get_ref<const std::string&>().empty())
          ids_complete_ = ids_complete_ && member(choice, "token_ids") != nullptr;
    } else if (const json* text = member(choice, "text"); text && text->is_string()) {
      piece = text->get_ref<const std::string&>();
    }
    text_.append(piece);
    const json* ids = member(choice, "token_ids");
    const std::size_t before = generated_ids_.size();
    if (ids != nullptr) {
      if (!append_ids(*ids, generated_ids_)) ids_complete_ = false;
    } else if (!piece.empty()) {
      ids_complete_ = false;
    }
    if (!piece.empty() || generated_ids_.size() > before) ++token_chunks_;
    if (const json* finish = member(choice, "finish_reason"); finish && finish->is_string()) finish_reason_ = finish->get<std::string>();
  }
}

void answer_ledger::carry(std::string_view text, const std::vector<std::uint32_t>& ids, bool ids_known) {
  text_.append(text);
  generated_ids_.insert(generated_ids_.end(), ids.begin(), ids.end());
  if (!ids_known) ids_complete_ = false;
  if (!text.empty() || !ids.empty()) ++token_chunks_;
}

}  // namespace kvr
