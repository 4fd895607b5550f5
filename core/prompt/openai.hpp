#pragma once
/// OpenAI request parsing into what routing needs, and OpenAI-shaped errors.
///
/// The body is parsed once with simdjson on-demand, reading only `model`, `stream`, `prompt`
/// (`text` / `input_ids` for `/generate`) and `messages`; the original bytes are what the
/// worker receives.

#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kvr {

/// What a request body is read for. Chat and text completions route on their prompts, and so
/// does SGLang's `/generate` (`text` or `input_ids`; of a batch, the first routes). Every other
/// route kvrouter passes through (`other`) is read for `model` and `stream` only and routes on
/// load, its prompt estimated from the body's size.
enum class api_endpoint : std::uint8_t { chat_completions, completions, generate, other };

/// Every error the API answers with, mapped to one status and OpenAI error type.
enum class api_errc : std::uint8_t {
  invalid_json,          ///< 400 invalid_request_error
  invalid_request,       ///< 400 invalid_request_error (missing or mistyped field)
  invalid_api_key,       ///< 401 invalid_request_error (no or a wrong `Authorization: Bearer` key)
  not_found,             ///< 404 (no such route)
  unknown_model,         ///< 404 model_not_found
  method_not_allowed,    ///< 405
  body_too_large,        ///< 413
  too_many_requests,     ///< 429 (in-flight bound of a worker set reached)
  queue_full,            ///< 429 (every worker busy and the set's queue full)
  queue_timeout,         ///< 503 (waited in the set's queue past its timeout)
  no_worker_available,   ///< 503 (every worker unhealthy, or none configured)
  overloaded,            ///< 503 (the routing actors are saturated)
  worker_failed,         ///< 502 (workers failed before answering)
  worker_timeout,        ///< 504 (no answer within the upstream timeout)
};

struct api_error {
  api_errc code = api_errc::invalid_request;
  std::string message;
  std::string param;  ///< the offending field, if any
};

[[nodiscard]] int http_status(api_errc code);
/// `{"error": {"message", "type", "param", "code"}}`.
[[nodiscard]] std::string error_body(const api_error& error);

/// What routing needs of a chat's messages, gathered as they are read: how many there are, how
/// many a chat template must spend tokens on, their text's bytes and their images in order.
/// Nothing is kept per message (the template renders from the messages' JSON), so a chat of a
/// million one-letter messages costs its body, not a million records of copies.
struct chat_messages {
  std::size_t count = 0;
  std::size_t user_or_assistant = 0;    ///< each renders at least a template's role markers (chat_budget)
  std::size_t text_bytes = 0;           ///< of every text part (the prompt's length is estimated from them)
  std::vector<std::string> image_urls;  ///< every `image_url` part (data URIs or http(s) URLs), in order
};

/// The raw JSON a chat template renders from (kept verbatim; parsed only by sets that render).
struct chat_template_inputs {
  std::string messages_json;         ///< the `messages` array
  std::string tools_json;            ///< the `tools` array, or empty
  std::string template_kwargs_json;  ///< vLLM's `chat_template_kwargs` object, or empty
  bool add_generation_prompt = true;  ///< vLLM's request field (default true)
};

/// What routing needs from a request.
struct routing_request {
  api_endpoint endpoint = api_endpoint::chat_completions;
  std::string model;
  bool stream = false;
  std::string user;  ///< the body's `user` (a conversation's key for session affinity)
  std::vector<std::uint32_t> prompt_token_ids;  ///< completions with a token-id prompt
  std::string prompt_text;                      ///< completions with a string prompt (the first)
  chat_messages messages;                       ///< chat completions
  chat_template_inputs chat;                    ///< chat completions
  /// Prompt length in tokens: exact for token-id prompts, otherwise estimated as text bytes / 4
  /// (+ 4 per chat message) until the set's tokenizer replaces the estimate.
  std::uint32_t prompt_tokens = 0;
};

/// Parses request bodies; reuses its buffers across calls (one per I/O thread).
class request_parser {
 public:
  /// Bytes a body buffer must be readable past its end (simdjson's padding).
  static const std::size_t padding;

  request_parser();
  ~request_parser();
  request_parser(const request_parser&) = delete;
  request_parser& operator=(const request_parser&) = delete;

  /// Parses `body`, which must be readable up to `capacity` >= body.size() + padding bytes
  /// (a std::string reserved that far avoids a copy).
  ///
  /// A completion or /generate whose prompt is an array of token ids takes a shortcut: the
  /// top-level members are scanned, the ids read by `read_token_id_array`, and only `model`,
  /// `stream` and `user` parsed, like `parse_envelope`; as there, other members are stepped over
  /// unvalidated (the worker judges them). Any other body, or a prompt outside that form, goes
  /// through `parse_walking`, whose errors it keeps.
  [[nodiscard]] std::expected<routing_request, api_error> parse(api_endpoint endpoint, std::string_view body,
                                                                std::size_t capacity);

  /// `parse` without its shortcut: the shape check, then simdjson over the whole body. Public
  /// for the tests and the fuzz target, which hold the shortcut to it.
  [[nodiscard]] std::expected<routing_request, api_error> parse_walking(api_endpoint endpoint, std::string_view body,
                                                                        std::size_t capacity);

  /// What a set that reads no prompt (round-robin, random) needs: `model`, `stream` and `user`,
  /// and that `messages` (an array) or `prompt` is there; every other field and the prompt's
  /// insides are skipped unread (the worker judges them), and the prompt's length is estimated
  /// from the body's size. No shape check: skipping is iterative, and nothing here walks a
  /// nested value. Same buffer contract as `parse`.
  [[nodiscard]] std::expected<routing_request, api_error> parse_envelope(api_endpoint endpoint, std::string_view body,
                                                                         std::size_t capacity);

 private:
  /// The shortcut of `parse`; nothing if the body does not qualify.
  std::optional<std::expected<routing_request, api_error>> parse_token_id_prompt(api_endpoint endpoint, std::string_view body,
                                                                                 std::size_t capacity);
  /// Reads `model`, `stream` and `user` of the members last scanned; true if the endpoint's
  /// prompt (`messages` or `prompt`) is among them.
  std::expected<bool, api_error> read_scanned_envelope(api_endpoint endpoint, routing_request& request);

  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kvr
