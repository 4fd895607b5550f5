#pragma once
/// The token ids of an answer whose engine reported none (SGLang's OpenAI API, vLLM before
/// 0.10.2, or an engine that ignores `return_token_ids`), rebuilt by kvrouter so that the answer
/// can still be continued (docs/migration.md): the prompt's ids as the engine computed them
/// (the request's messages rendered with the set's chat template, or its prompt, tokenized by
/// the set's tokenizer: core/prompt/tokenize_api), the answer's by tokenizing the text the
/// client was sent.
///
/// Exact where the engine's generated ids are the tokenizer's own reading of their text, which
/// is what a model trained on that tokenizer nearly always generates; where they are not (a
/// word generated in pieces the tokenizer would have merged), the continuation starts from a
/// prompt that reads the same but is tokenized differently, and may go on differently.

#include <cstddef>
#include <string_view>

#include "core/migration/answer_ledger.hpp"
#include "core/prompt/chat_template.hpp"
#include "core/prompt/tokenizer.hpp"

namespace kvr {

/// What a worker set reads prompts with (null `text`: it has no tokenizer).
struct prompt_tokenizers {
  const tokenizer* text = nullptr;
  const chat_template* chat = nullptr;
  bool plain_fallback = false;  ///< chats without a template render as `role: content` lines
};

/// Gives `ledger` the ids of the request `body`'s prompt and of the answer's text, and returns
/// true; false (the ledger untouched) when they cannot be rebuilt: no tokenizer, a chat the set
/// cannot render, reasoning text the client was not sent as content, or a prompt longer than
/// `max_tokens`.
[[nodiscard]] bool rebuild_ids_from_text(answer_ledger& ledger, std::string_view body, const prompt_tokenizers& set,
                                         std::size_t max_tokens);

}  // namespace kvr
