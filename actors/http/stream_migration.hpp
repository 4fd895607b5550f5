#pragma once
/// One request's migration (docs/migration.md): whether its streamed answer may be continued on
/// another worker should its own fail mid-way, what the client has been sent so far, and the
/// continuations. Owned by the request's `request_exchange`, which routes and sends; this is the
/// body filter of both kinds of leg:
///   the first leg    its events are read into the answer's ledger as they pass (the token ids
///                    kvrouter asked the engine for are stripped when the client did not ask),
///                    and an engine's error event is a failure, not the client's to see;
///   a continuation   the continuing worker's events are rewritten into the client's stream
///                    (core/migration/continuation: `continuation_relay`).
/// Only the parsing and rewriting is here; the rules are core/migration's.

#include <cstdint>
#include <expected>
#include <optional>
#include <string>

#include "actors/http/body_filter.hpp"
#include "core/config/router_config.hpp"
#include "core/migration/continuation.hpp"
#include "core/migration/sse_events.hpp"
#include "core/migration/text_fallback.hpp"
#include "core/migration/whole_answer.hpp"
#include "core/prompt/openai.hpp"

namespace kvr::ingress {

class stream_migration final : public body_filter {
 public:
  /// Before the first leg starts: whether `request` (its body `client_body`) may be continued
  /// elsewhere, under its set's `config`. When it may, the worker is sent `sent_body()` (the
  /// client's body asking for token ids) and the leg's events go through this filter. A
  /// non-streamed request is then streamed from the worker (`whole()`): its events are
  /// gathered, and the client gets `whole_answer_body()` once the answer is complete.
  void arm(const std::string& client_body, const routing_request& request, const router_config& config);
  [[nodiscard]] bool armed() const { return leg_ != leg::off; }
  /// The client asked for a whole answer, which is gathered from the worker's stream.
  [[nodiscard]] bool whole() const { return whole_ && leg_ != leg::off; }
  /// The gathered answer (whole() only), once its stream is over.
  [[nodiscard]] std::string whole_answer_body() const { return gathered_.body(); }
  /// `events` (client-facing SSE bytes kvrouter wrote itself: an answer's end) join the gathered answer.
  void gather(std::string_view events);
  /// The body the first leg sends: the client's with `return_token_ids`, or null for the client's own.
  [[nodiscard]] const std::string* sent_body() const { return sent_body_.empty() ? nullptr : &sent_body_; }

  /// The answer's worker broke off: its continuation, or why there is none. Counts the attempt.
  /// Where the engine reported no token ids, they are rebuilt from the text with the set's
  /// `prompts` (tokenizing at most `max_tokens`).
  [[nodiscard]] std::expected<continuation, migration_refusal> plan(const prompt_tokenizers& prompts, std::size_t max_tokens);
  /// The last plan() rebuilt the ids from the answer's text (the engine reported none).
  [[nodiscard]] bool ids_from_text() const { return ids_from_text_; }
  /// What the continuation is routed as: a completion whose prompt is its token ids.
  [[nodiscard]] routing_request continuation_request(const std::string& model) const;
  /// The continuation leg starts (after plan()): its events are rewritten from here.
  void start_continuation(continuation next);
  [[nodiscard]] const std::string& continuation_body() const { return continuation_.body; }
  [[nodiscard]] std::uint32_t migrations() const { return migrations_; }
  [[nodiscard]] std::uint32_t carried_tokens() const { return continuation_.carried_tokens; }

  /// The end of a stream with nothing left to generate (its `max_tokens` used up).
  [[nodiscard]] std::string finished_events();
  /// The end of a stream that cannot go on: an error event saying why, then `[DONE]`.
  [[nodiscard]] std::string error_events(std::string_view why) const;

  /// Forgets the request (the connection's next one starts fresh).
  void reset();

  // -- body_filter ----------------------------------------------------------------------------
  void on_head(unsigned status, bool event_stream) override;
  [[nodiscard]] result filter(std::string_view bytes) override;

 private:
  enum class leg : std::uint8_t { off, first, continuation };

  leg leg_ = leg::off;
  bool passive_ = false;      ///< the answer cannot be followed (not a 200 event stream): bytes pass untouched
  bool rewritten_ = false;    ///< the worker is asked for token ids the client did not ask for (strip them)
  bool client_usage_ = false; ///< the client asked for `stream_options.include_usage`
  bool whole_ = false;        ///< the client asked for a whole answer: the stream is gathered, not relayed
  const std::string* client_body_ = nullptr;
  std::string sent_body_;
  std::uint32_t limit_ = 0;
  std::uint32_t max_seq_len_ = 0;
  std::uint32_t migrations_ = 0;
  bool ids_from_text_ = false;
  sse_reader reader_;
  answer_ledger ledger_;
  continuation continuation_;
  std::optional<continuation_relay> relay_;
  std::string out_;  ///< the filtered bytes of the last call
  sse_reader gathered_reader_;  ///< whole(): the client-facing events, read back
  whole_answer gathered_;
};

}  // namespace kvr::ingress
