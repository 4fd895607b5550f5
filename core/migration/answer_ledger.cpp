#include "core/migration/answer_ledger.hpp"

#include "core/migration/dom_fields.hpp"

namespace kvr {

using namespace dom_fields;

void answer_ledger::observe(std::string_view data) {
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  // Every event of every followed stream passes here: its fields are read off simdjson's
  // document, no tree is built (docs/benchmarks.md). simdjson bounds the nesting itself
  // (1024 levels, iteratively); text it refuses (an integer past 64 bits, say) is unreadable.
  thread_local simdjson::dom::parser parser;
  element chunk;
  if (parser.parse(data.data(), data.size(), true).get(chunk) != simdjson::SUCCESS || chunk.type() != element_type::OBJECT) {
    unreadable_ = true;
    return;
  }
  if (member(chunk, "error")) {
    engine_error_ = true;
    return;
  }
  if (!started_) {
    started_ = true;
    if (const auto id = member(chunk, "id"); id && id->is_string()) id_ = std::string_view(*id);
    if (const auto created = member(chunk, "created"); created && created->type() == element_type::INT64) created_ = std::int64_t(*created);
    if (const auto model = member(chunk, "model"); model && model->is_string()) model_ = std::string_view(*model);
    if (const auto object = member(chunk, "object"); object && object->is_string())
      chat_ = std::string_view(*object) == "chat.completion.chunk";
  }
  if (const auto ids = member(chunk, "prompt_token_ids"); ids && prompt_ids_.empty() && !append_ids(*ids, prompt_ids_))
    prompt_ids_.clear();
  if (member(chunk, "usage")) usage_seen_ = true;
  const auto choices = member(chunk, "choices");
  if (!choices || choices->type() != element_type::ARRAY) return;
  for (const element choice : simdjson::dom::array(*choices)) {
    if (choice.type() != element_type::OBJECT) continue;
    const auto index = member(choice, "index");
    if (index && token_id(*index) != 0u) continue;
    if (const auto ids = member(choice, "prompt_token_ids"); ids && prompt_ids_.empty() && !append_ids(*ids, prompt_ids_))
      prompt_ids_.clear();
    if (member(choice, "logprobs")) logprobs_seen_ = true;
    std::string_view piece;
    if (const auto delta = member(choice, "delta"); is_object(delta)) {
      if (member(*delta, "role")) role_sent_ = true;
      if (member(*delta, "tool_calls")) tool_call_started_ = true;
      piece = string_or_empty(member(*delta, "content"));
      // Reasoning text is generated too: only its token ids can carry it into a continuation.
      for (const char* reasoning : {"reasoning_content", "reasoning"})
        if (!string_or_empty(member(*delta, reasoning)).empty()) {
          ids_complete_ = ids_complete_ && member(choice, "token_ids").has_value();
          text_is_whole_ = false;
        }
    } else {
      piece = string_or_empty(member(choice, "text"));
    }
    text_.append(piece);
    const auto ids = member(choice, "token_ids");
    const std::size_t before = generated_ids_.size();
    if (ids) {
      if (!append_ids(*ids, generated_ids_)) ids_complete_ = false;
    } else if (!piece.empty()) {
      ids_complete_ = false;
    }
    if (!piece.empty() || generated_ids_.size() > before) ++token_chunks_;
    if (const auto finish = member(choice, "finish_reason"); finish && finish->is_string()) finish_reason_ = std::string_view(*finish);
  }
}

void answer_ledger::carry(std::string_view text, const std::vector<std::uint32_t>& ids, bool ids_known) {
  text_.append(text);
  generated_ids_.insert(generated_ids_.end(), ids.begin(), ids.end());
  if (!ids_known) ids_complete_ = false;
  if (!text.empty() || !ids.empty()) ++token_chunks_;
}

void answer_ledger::adopt_ids(std::vector<std::uint32_t> prompt, std::vector<std::uint32_t> generated) {
  prompt_ids_ = std::move(prompt);
  generated_ids_ = std::move(generated);
  ids_complete_ = true;
}

}  // namespace kvr
