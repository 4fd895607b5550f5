#pragma once
/// What a client has been sent of one streamed chat or completion answer, read off the events
/// as they pass (core/migration/sse_events): the answer's identity (`id`, `created`, `model`),
/// whether the role delta went out, the text and the token ids generated so far, the prompt's
/// token ids where the engine reports them (vLLM's `return_token_ids`: `prompt_token_ids` on
/// the first chunk, `token_ids` on each choice), the finish reason and usage once they come.
/// It is what a continuation on another worker starts from (core/migration/continuation).
///
/// Only choice 0 is followed: answers with several choices are never continued.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvr {

class answer_ledger {
 public:
  /// One event's data (a JSON chunk, or `[DONE]`). Data that is not a JSON object marks the
  /// stream unreadable; nothing else changes.
  void observe(std::string_view data);

  [[nodiscard]] const std::string& id() const { return id_; }
  [[nodiscard]] std::int64_t created() const { return created_; }
  [[nodiscard]] const std::string& model() const { return model_; }
  /// The answer is a chat (`chat.completion.chunk`), not a text completion.
  [[nodiscard]] bool chat() const { return chat_; }
  [[nodiscard]] bool role_sent() const { return role_sent_; }
  [[nodiscard]] const std::string& text() const { return text_; }
  [[nodiscard]] const std::vector<std::uint32_t>& generated_ids() const { return generated_ids_; }
  [[nodiscard]] const std::vector<std::uint32_t>& prompt_ids() const { return prompt_ids_; }
  /// Every chunk that carried generated text also carried its token ids (so `generated_ids`
  /// is the whole answer so far, not a part of it).
  [[nodiscard]] bool ids_complete() const { return ids_complete_; }
  /// The text is the whole answer so far (no reasoning text went out beside it), so the
  /// answer's ids can be rebuilt from it by tokenizing (core/migration/text_fallback).
  [[nodiscard]] bool text_is_whole() const { return text_is_whole_; }
  /// Chunks that carried generated tokens.
  [[nodiscard]] std::uint32_t token_chunks() const { return token_chunks_; }
  [[nodiscard]] const std::optional<std::string>& finish_reason() const { return finish_reason_; }
  [[nodiscard]] bool tool_call_started() const { return tool_call_started_; }
  [[nodiscard]] bool logprobs_seen() const { return logprobs_seen_; }
  [[nodiscard]] bool usage_seen() const { return usage_seen_; }
  [[nodiscard]] bool done() const { return done_; }
  /// The engine sent an error event (`{"error": ...}`) after the answer began.
  [[nodiscard]] bool engine_error() const { return engine_error_; }
  [[nodiscard]] bool unreadable() const { return unreadable_; }
  /// Events seen, and chunks with the answer's identity (the first one sets it).
  [[nodiscard]] bool started() const { return started_; }

  /// Appends what a continuation generated (its ids and text), so that a second migration
  /// continues from the whole answer.
  void carry(std::string_view text, const std::vector<std::uint32_t>& ids, bool ids_known);
  /// The prompt's and the answer's ids as kvrouter computed them, where the engine reported
  /// none (core/migration/text_fallback): what a continuation starts from.
  void adopt_ids(std::vector<std::uint32_t> prompt, std::vector<std::uint32_t> generated);
  void mark_finished(std::string reason) { finish_reason_ = std::move(reason); }
  void mark_usage_sent() { usage_seen_ = true; }
  void mark_done() { done_ = true; }

 private:
  std::string id_;
  std::int64_t created_ = 0;
  std::string model_;
  bool chat_ = false;
  bool started_ = false;
  bool role_sent_ = false;
  std::string text_;
  std::vector<std::uint32_t> generated_ids_;
  std::vector<std::uint32_t> prompt_ids_;
  bool ids_complete_ = true;
  bool text_is_whole_ = true;
  std::uint32_t token_chunks_ = 0;
  std::optional<std::string> finish_reason_;
  bool tool_call_started_ = false;
  bool logprobs_seen_ = false;
  bool usage_seen_ = false;
  bool done_ = false;
  bool engine_error_ = false;
  bool unreadable_ = false;
};

}  // namespace kvr
