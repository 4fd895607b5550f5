#include "core/migration/text_fallback.hpp"

#include "core/prompt/tokenize_api.hpp"

namespace kvr {

bool rebuild_ids_from_text(answer_ledger& ledger, std::string_view body, const prompt_tokenizers& set, std::size_t max_tokens) {
  if (set.text == nullptr || !ledger.text_is_whole()) return false;
  tokenizer own = set.text->share();  // a cache of its own: the set's is read-only here
  auto prompt = prompt_token_ids(body, own, set.chat, set.plain_fallback,
                                 {.completion_prompts = true, .max_tokens = max_tokens});
  if (!prompt || prompt->empty()) return false;
  std::vector<std::uint32_t> generated;
  own.encode(ledger.text(), generated, max_tokens);
  if (prompt->size() + generated.size() > max_tokens) return false;
  ledger.adopt_ids(std::move(*prompt), std::move(generated));
  return true;
}

}  // namespace kvr
