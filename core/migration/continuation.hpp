#pragma once
/// A streamed answer whose worker failed mid-way, continued on another worker (issue 41,
/// docs/migration.md): when a request may be continued at all, the continuation's request, and
/// its answer's events rewritten into the client's stream.
///
/// The continuation is a text completion whose prompt is the token ids of the original prompt
/// followed by those generated so far (as vLLM reports them with `return_token_ids`), with
/// `max_tokens` (and `min_tokens`) lowered by what was generated and the request's sampling
/// parameters and seed. Its events reach the client as if the first worker had gone on: the
/// same `id`, `created`, `model` and choice index, chat deltas for a chat, no second role delta,
/// one `usage` that counts the whole answer, and `finish_reason` from the worker that finished.

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/migration/answer_ledger.hpp"

namespace kvr {

/// Why an answer is not continued elsewhere (`kvrouter_migration_refused_total{reason}`).
enum class migration_refusal : std::uint8_t {
  several_choices,    ///< `n` or `best_of` above 1
  logprobs,           ///< log probabilities asked for: a continuation cannot give the same ones
  structured_output,  ///< guided decoding: the grammar's state is the first worker's
  tool_call,          ///< a tool call was being streamed
  unreadable_stream,  ///< the answer's events could not be followed
  no_token_ids,       ///< the engine did not report the prompt's or the answer's token ids
  too_long,           ///< the continuation's prompt would pass --migration-max-seq-len
  limit_reached,      ///< continued --migration-limit times already
  no_worker,          ///< no other worker could take the continuation
  count,
};

[[nodiscard]] std::string_view to_string(migration_refusal why);

/// What makes a request (its body) never continued, whatever its answer: checked when it is
/// sent, so that nothing is asked of the engine for a request that cannot migrate.
[[nodiscard]] std::optional<migration_refusal> refuses_migration(const nlohmann::json& body);

/// Whether a non-streamed request (its body's bytes) may be streamed from its worker and
/// gathered (core/migration/whole_answer), so that it can be continued elsewhere: the rules
/// above, read member by member without a tree of the body, and neither tools (tool calls are
/// not gathered) nor `echo`.
[[nodiscard]] bool whole_answer_can_be_followed(std::string_view body);

struct continuation {
  std::string body;                  ///< a `/v1/completions` request body ("" when nothing is left)
  std::uint32_t carried_tokens = 0;  ///< generated tokens the continuation starts from
  /// `max_tokens` is used up: the answer is whole, only its end is missing.
  [[nodiscard]] bool nothing_left() const { return body.empty(); }
};

/// The continuation of the answer `ledger` followed, for the request `body`, or why there is
/// none. `max_seq_len`: the longest prompt a continuation may have (0: no bound). An answer
/// whose `max_tokens` is used up has nothing to continue (`nothing_left`): its end is
/// `continuation_relay::finish("length")`.
[[nodiscard]] std::expected<continuation, migration_refusal> continue_answer(const nlohmann::json& body,
                                                                             const answer_ledger& ledger,
                                                                             std::uint32_t max_seq_len);

/// The tokens `body` may still generate after `generated` (nullopt: no limit was given).
[[nodiscard]] std::optional<std::int64_t> tokens_left(const nlohmann::json& body, bool chat, std::uint32_t generated);

/// The continuation's events, rewritten for the client whose answer `ledger` followed.
class continuation_relay {
 public:
  struct wants {
    bool token_ids = false;  ///< the client itself asked for `return_token_ids`
    bool usage = false;      ///< the client asked for `stream_options.include_usage`
  };
  struct step {
    std::string to_client;  ///< SSE bytes for the client ("" = nothing)
    bool failed = false;    ///< the continuing worker sent an error event: it failed too
  };

  continuation_relay(answer_ledger& ledger, wants client, std::uint32_t carried_tokens)
      : ledger_(ledger), client_(client), carried_(carried_tokens) {}

  /// One event's data from the continuing worker.
  [[nodiscard]] step relay(std::string_view data);
  /// The stream's end when there is nothing to continue (max_tokens used up): the last chunk's
  /// `finish_reason`, usage if asked for, `[DONE]`.
  [[nodiscard]] std::string finish(std::string_view reason);

 private:
  [[nodiscard]] std::string chunk(std::string_view text, const std::vector<std::uint32_t>* token_ids,
                                  const nlohmann::json& finish_reason, const nlohmann::json& stop_reason) const;
  [[nodiscard]] std::string usage_chunk(std::int64_t completion_tokens) const;

  answer_ledger& ledger_;
  wants client_;
  std::uint32_t carried_;
};

/// `data` (one event's JSON chunk) without the token ids kvrouter asked the engine for: the
/// top-level `prompt_token_ids` and each choice's `prompt_token_ids` and `token_ids`. Data
/// that is not a JSON object is returned as it is.
[[nodiscard]] std::string without_token_ids(std::string_view data);

}  // namespace kvr
