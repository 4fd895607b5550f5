#pragma once
/// What a chat costs at least, known before it is rendered: a request that will be refused for
/// its length is refused before rendering and tokenizing it cost memory and CPU (a 34 MB chat
/// of 10^6 one-letter messages took 808 MB and 7.9 s to reach its refusal; docs/benchmarks.md).
///
/// The bound is probed from the set's own template and tokenizer at load: conversations of 1 to
/// 8 alternating user and assistant messages with empty content are rendered, and the fewest
/// tokens per message any of them took is what every user or assistant message costs at least
/// (Qwen3: 5, its role markers). A template under which some message adds nothing (one that
/// keeps only the last turns, say) probes 0, and then nothing is refused early. Content only
/// adds tokens, so the bound refuses no chat the full render would accept, for templates that
/// render every turn they were given (one that drops turns only past the eighth is not seen).

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/prompt/chat_template.hpp"
#include "core/prompt/openai.hpp"
#include "core/prompt/tokenizer.hpp"

namespace kvr {

/// The fewest tokens one user or assistant message adds to a chat `chat` renders and `text`
/// tokenizes (`chat` null: the plain `role: content` fallback); 0 if the probe cannot tell.
[[nodiscard]] std::uint32_t probe_tokens_per_message(const chat_template* chat, tokenizer& text);

/// The fewest tokens `messages` renders to: each user or assistant message costs at least
/// `tokens_per_message` (other roles count nothing).
[[nodiscard]] std::size_t chat_tokens_at_least(const chat_messages& messages, std::uint32_t tokens_per_message);

}  // namespace kvr
