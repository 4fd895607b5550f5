#include "core/prompt/chat_budget.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace kvr {
namespace {

/// Probe conversations grow to this many messages: enough to see a template that drops earlier
/// turns (its steps add nothing once it does); one that drops them only past this many is not
/// seen.
constexpr std::size_t probe_messages = 8;

/// The token count of `count` alternating empty messages (user first), or nullopt if the
/// template refuses them.
std::optional<std::size_t> probe_tokens(const chat_template* chat, tokenizer& text, std::size_t count) {
  std::string messages = "[";
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0) messages += ',';
    messages += i % 2 == 0 ? R"({"role":"user","content":""})" : R"({"role":"assistant","content":""})";
  }
  messages += ']';
  const chat_render_inputs inputs{.messages_json = messages, .add_generation_prompt = false};
  auto rendered = chat != nullptr ? chat->render(inputs) : chat_template::render_plain(inputs);
  if (!rendered) return std::nullopt;
  std::vector<std::uint32_t> ids;
  text.encode(*rendered, ids);
  return ids.size();
}

}  // namespace

std::uint32_t probe_tokens_per_message(const chat_template* chat, tokenizer& text) {
  std::size_t previous = 0;
  std::size_t fewest = std::numeric_limits<std::uint32_t>::max();
  for (std::size_t count = 1; count <= probe_messages; ++count) {
    const auto now = probe_tokens(chat, text, count);
    // A message that adds nothing (or a template that refuses the probe): no bound.
    if (!now || *now <= previous) return 0;
    // Per message over the whole conversation, not per step: a step may take back what the
    // last one added (Qwen3 gives only the last assistant turn an empty <think> block).
    fewest = std::min(fewest, *now / count);
    previous = *now;
  }
  return static_cast<std::uint32_t>(fewest);
}

std::size_t chat_tokens_at_least(const chat_messages& messages, std::uint32_t tokens_per_message) {
  return messages.user_or_assistant * tokens_per_message;
}

}  // namespace kvr
