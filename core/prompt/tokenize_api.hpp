#pragma once
/// vLLM's `/tokenize` and `/detokenize`, answered with a set's own tokenizer and chat template
/// (the ids the engines compute, so the router can answer without a round trip to a worker).
///
///   POST /tokenize   {"prompt": "...", "add_special_tokens": true}
///                    {"messages": [...], "add_generation_prompt": true, "add_special_tokens": false,
///                     "tools": [...], "chat_template_kwargs": {...}}
///                 -> {"count": N, "tokens": [...], "token_strs": null}
///   POST /detokenize {"tokens": [...]} -> {"prompt": "..."}

#include <expected>
#include <string>
#include <string_view>

#include "core/prompt/chat_template.hpp"
#include "core/prompt/openai.hpp"
#include "core/prompt/tokenizer.hpp"

namespace kvr {

/// Whether a /tokenize body asks for what only the engine has (`return_token_strs`: the vocab's
/// token strings); such a request passes through to a worker.
[[nodiscard]] bool tokenize_needs_engine(std::string_view body);

/// The answer to a /tokenize body. `chat` null: chats are rendered as plain `role: content`
/// lines when `plain_fallback`, else refused (400).
[[nodiscard]] std::expected<std::string, api_error> answer_tokenize(std::string_view body, tokenizer& text,
                                                                    const chat_template* chat, bool plain_fallback);

/// The answer to a /detokenize body; an id outside the vocabulary is a 400 naming it.
[[nodiscard]] std::expected<std::string, api_error> answer_detokenize(std::string_view body, const tokenizer& text);

}  // namespace kvr
