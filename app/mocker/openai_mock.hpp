#pragma once
/// The OpenAI side of the simulated engine: reads a completion or chat request into a prompt's
/// token ids (tokenized exactly as the router does: same tokenizer, same chat template code),
/// and writes answers in vLLM's shapes (SSE chunks, final objects, errors).

#include <cstdint>
#include <expected>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <optional>

#include <nlohmann/json_fwd.hpp>

#include "core/kv/block_hash.hpp"
#include "core/prompt/chat_template.hpp"
#include "core/config/router_file.hpp"
#include "core/prompt/tokenizer.hpp"

namespace kvr::mocker {

struct mock_request {
  bool chat = false;
  bool stream = false;
  bool include_usage = false;  ///< stream_options.include_usage
  std::string model;
  std::vector<std::uint32_t> prompt;
  std::vector<image_span> images;  ///< expanded image runs in `prompt` (multimodal, data URIs)
  std::uint32_t max_tokens = 16;
  bool return_token_ids = false;  ///< vLLM's `return_token_ids`: the ids go with the text
  /// vLLM's NIXL connector fields (`kv_transfer_params`): a prefill leg asks for a remote
  /// decode; a decode leg names the prefill worker to pull the prompt's KV from.
  struct transfer {
    bool remote_decode = false;
    bool remote_prefill = false;
    std::string remote_host;
    std::uint16_t remote_port = 0;
    std::string remote_request_id;
    std::string raw;  ///< the object as received
  };
  std::optional<transfer> kv_transfer;
  /// SGLang's disaggregation fields: both legs name the prefill worker's bootstrap server and
  /// the room they meet in.
  struct bootstrap {
    std::string host;
    std::uint16_t port = 0;
    std::uint64_t room = 0;
  };
  std::optional<bootstrap> sglang_bootstrap;
};

/// The words the mocker's model generates, with their ids. With a tokenizer, each word's id is
/// the tokenizer's own (words it would split are left out), so an answer's text tokenizes back
/// to exactly the ids generated, as a real model's nearly always does (kvrouter's migration
/// relies on it where an engine reports no ids); without one, ids from 1000 up.
struct greedy_vocabulary {
  std::vector<std::uint32_t> ids;
  std::vector<std::string_view> words;
  [[nodiscard]] static greedy_vocabulary of(const tokenizer* text);
};

/// Turns prompts into token ids. Without a tokenizer, text is split on spaces and each word
/// hashed to an id (deterministic, but not what a router with a real tokenizer computes).
class prompt_tokenizer {
 public:
  /// `multimodal`: the model's image rule; chats' data-URI images are then expanded into their
  /// placeholder tokens and hashed exactly as kvrouter does (URL images are left as one token).
  prompt_tokenizer(std::shared_ptr<const tokenizer> text, std::shared_ptr<const chat_template> chat,
                   std::optional<multimodal_card> multimodal = std::nullopt);
  /// Thread-safe: each call uses its own tokenizer cache.
  [[nodiscard]] std::expected<mock_request, std::string> parse(std::string_view body, bool chat) const;
  [[nodiscard]] const greedy_vocabulary& vocabulary() const { return vocabulary_; }

 private:
  std::vector<std::uint32_t> tokenize(const std::string& text) const;
  void expand_images(const nlohmann::json& messages, mock_request& out) const;

  std::shared_ptr<const tokenizer> text_;
  std::shared_ptr<const chat_template> chat_;
  std::optional<multimodal_card> multimodal_;
  greedy_vocabulary vocabulary_;
};

/// The mocker's model: greedy, each generated token a function of every token before it (the
/// prompt's and those generated so far). The same prompt reads the same on any worker, and an
/// answer continued elsewhere from its prompt and its first tokens (a migration's token-id
/// prompt) goes on exactly as it would have.
class greedy_answer {
 public:
  greedy_answer(const std::vector<std::uint32_t>& prompt, const greedy_vocabulary& vocabulary);
  struct token {
    std::uint32_t id = 0;
    std::string_view text;  ///< " word"
  };
  [[nodiscard]] token next();

 private:
  const greedy_vocabulary* vocabulary_;
  std::uint64_t context_;  ///< FNV-1a over the tokens so far
};

/// One SSE `data:` line for `text` (vLLM's chunk shape), with the finish reason on the last;
/// with `return_token_ids`, the chunk's `token_ids` (and on the first, the prompt's).
[[nodiscard]] std::string stream_chunk(const mock_request& request, std::uint64_t id, std::string_view text,
                                       const std::vector<std::uint32_t>& token_ids, bool first, bool last);
/// The usage chunk sent before `[DONE]` when include_usage is set.
/// `cached_tokens`, when given, is reported as `usage.prompt_tokens_details.cached_tokens`.
[[nodiscard]] std::string usage_chunk(const mock_request& request, std::uint64_t id, std::uint32_t completion_tokens,
                                      std::optional<std::uint32_t> cached_tokens = std::nullopt);
/// The whole answer of a non-streaming request.
[[nodiscard]] std::string final_body(const mock_request& request, std::uint64_t id, std::string_view text,
                                     std::uint32_t completion_tokens, std::optional<std::uint32_t> cached_tokens = std::nullopt);
/// `{"error": {...}}` as vLLM answers.
[[nodiscard]] std::string error_json(std::string_view message, std::string_view type, int code);

}  // namespace kvr::mocker
