#pragma once
/// A non-streamed chat or completion that kvrouter streams from the engine so that it can be
/// continued elsewhere should its worker fail mid-way (docs/migration.md): the client-facing
/// events of the answer (what a streamed client would have read, continuations rewritten in)
/// gathered into the one JSON object a non-streamed client expects, in vLLM's shape:
///
///   chat        {"id", "object": "chat.completion", "created", "model",
///                "choices": [{"index": 0, "message": {"role", "content"[, "reasoning_content"]},
///                             "logprobs": null, "finish_reason", "stop_reason"[, "token_ids"]}],
///                ["prompt_token_ids",] "usage"}
///   completion  {"id", "object": "text_completion", "created", "model",
///                "choices": [{"index": 0, "text", "logprobs": null, "finish_reason", "stop_reason"
///                             [, "prompt_token_ids", "token_ids"]}], "usage"}
///
/// `id`, `created` and `model` are the first chunk's (left out where it had none), and so are
/// the other members of the first chunk a chunk has beside its choices (`system_fingerprint`,
/// an engine's own fields): they go into the answer as they were.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvr {

class whole_answer {
 public:
  /// One event's data of the client-facing stream (a JSON chunk, or `[DONE]`).
  void add(std::string_view data);
  /// The answer as one JSON object.
  [[nodiscard]] std::string body() const;
  [[nodiscard]] bool done() const { return done_; }

 private:
  bool started_ = false;
  bool chat_ = false;
  bool done_ = false;
  std::optional<std::string> id_;
  std::optional<std::int64_t> created_;
  std::optional<std::string> model_;
  std::vector<std::pair<std::string, std::string>> extras_;  ///< the first chunk's other members, as JSON text
  std::string role_ = "assistant";
  std::string content_;
  std::string reasoning_;
  std::optional<std::string> finish_reason_;
  std::string stop_reason_ = "null";  ///< as JSON text
  std::string usage_ = "null";        ///< as JSON text
  bool token_ids_seen_ = false;
  std::vector<std::uint32_t> token_ids_;
  std::optional<std::vector<std::uint32_t>> prompt_token_ids_;
};

}  // namespace kvr
