#pragma once
/// vLLM's `/tokenize` and `/detokenize`, answered with a set's own tokenizer and chat template
/// (the ids the engines compute, so the router can answer without a round trip to a worker),
/// and the prompt ids an engine computes for a chat or completion body.
///
///   POST /tokenize   {"prompt": "...", "add_special_tokens": true}
///                    {"messages": [...], "add_generation_prompt": true, "add_special_tokens": false,
///                     "tools": [...], "chat_template_kwargs": {...}}
///                 -> {"count": N, "tokens": [...], "token_strs": null}
///   POST /detokenize {"tokens": [...]} -> {"prompt": "..."}
///
/// A body is read by its top-level members (core/common/json_top_level), its nesting bounded
/// first; the members used are read from their own bytes (a chat's `messages` go to the
/// template as sent), so no tree of the body is built.

#include <cstddef>
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "core/prompt/chat_template.hpp"
#include "core/prompt/openai.hpp"
#include "core/prompt/tokenizer.hpp"

namespace kvr {

/// Whether a /tokenize body asks for what only the engine has (`return_token_strs`: the vocab's
/// token strings); such a request passes through to a worker.
[[nodiscard]] bool tokenize_needs_engine(std::string_view body);

/// How a body's prompt is read.
struct prompt_reading {
  /// A completion's `prompt` may also be token ids, or an array of one string (as the
  /// completions API takes it); /tokenize takes a string only, as vLLM's does.
  bool completion_prompts = false;
  /// A prompt of more tokens is refused (400) and tokenized no further than this.
  std::size_t max_tokens = SIZE_MAX;
};

/// The prompt's token ids as the engine computes them: `messages` rendered with `chat` (with
/// the body's `tools`, `chat_template_kwargs` and `add_generation_prompt`) and tokenized, or
/// `prompt` tokenized; the tokenizer's special tokens added where `add_special_tokens` says, by
/// vLLM's defaults (false for messages: the template writes them; true for a prompt), except to
/// a prompt of token ids, which goes to the engine as it is. `chat`
/// null: chats are rendered as plain `role: content` lines when `plain_fallback`, else refused.
[[nodiscard]] std::expected<std::vector<std::uint32_t>, api_error> prompt_token_ids(std::string_view body, tokenizer& text,
                                                                                    const chat_template* chat,
                                                                                    bool plain_fallback,
                                                                                    const prompt_reading& reading = {});

/// The answer to a /tokenize body: its prompt's ids (above), refused past `max_tokens`.
[[nodiscard]] std::expected<std::string, api_error> answer_tokenize(std::string_view body, tokenizer& text,
                                                                    const chat_template* chat, bool plain_fallback,
                                                                    std::size_t max_tokens = SIZE_MAX);

/// The answer to a /detokenize body; an id outside the vocabulary is a 400 naming it.
[[nodiscard]] std::expected<std::string, api_error> answer_detokenize(std::string_view body, const tokenizer& text);

}  // namespace kvr
