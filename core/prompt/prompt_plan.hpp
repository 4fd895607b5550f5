#pragma once
/// Which path a request's prompt takes to its block hashes, decided in one place for ingress
/// (does the request go through a hasher at all?) and the hasher (what does it do with it?), so
/// the two cannot disagree.

#include <cstdint>
#include <string_view>

#include "core/prompt/openai.hpp"

namespace kvr {

/// What a worker set can do with prompts (fixed when its pipeline is built).
struct prompt_capabilities {
  bool tokenizer = false;  ///< text can be tokenized
  bool chat = false;       ///< chats can be rendered (a template or the plain fallback) and tokenized
  bool images = false;     ///< the set is multimodal and scores overlap: images are hashed
};

enum class prompt_path : std::uint8_t {
  none,       ///< nothing to hash: the request routes on its estimated length and load alone
  token_ids,  ///< the request carries token ids: hash them as they are
  text,       ///< tokenize the prompt text, then hash
  chat,       ///< render the chat with the set's template, tokenize, then hash
};

struct prompt_plan {
  prompt_path path = prompt_path::none;
  bool images = false;  ///< chat path only: the request's images are resolved, spliced and hashed

  /// Whether the request takes the hop through a hasher.
  [[nodiscard]] bool needs_hasher() const { return path != prompt_path::none; }
};

[[nodiscard]] prompt_plan plan_prompt(const routing_request& request, const prompt_capabilities& set);

[[nodiscard]] std::string_view to_string(prompt_path path);

}  // namespace kvr
