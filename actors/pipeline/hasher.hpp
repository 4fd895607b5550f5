#pragma once
/// A worker set's hashers: turn a request's prompt into the block hashes the scorer matches
/// against the prefix index. Token-id prompts are hashed as given; text prompts are tokenized
/// with the set's tokenizer; chat requests are rendered with the set's chat template first,
/// exactly as the engines render and tokenize them. A pool per set (`--hashers`) spreads the
/// tokenization over cores; each hasher owns its caches, and they all read the same tables.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include "actors/pipeline/media_fetcher.hpp"
#include "core/prompt/chat_template.hpp"
#include "core/config/router_file.hpp"
#include "core/prompt/tokenizer.hpp"
#include "actors/pipeline/scorer.hpp"

namespace kvr {

/// Per-set counters the hashers keep (shown on /metrics).
struct hasher_counters {
  std::atomic<std::uint64_t> prompts_tokenized{0};    ///< text and chat prompts tokenized
  std::atomic<std::uint64_t> chats_rendered{0};       ///< chat requests rendered by the template
  std::atomic<std::uint64_t> chat_render_errors{0};   ///< templates that refused a request (routed on load)
  std::atomic<std::uint64_t> segment_cache_hits{0};   ///< message segments whose ids were reused
  std::atomic<std::uint64_t> segment_cache_misses{0};
  // Multimodal routing (sets with a `multimodal` card only; zero everywhere else).
  std::atomic<std::uint64_t> images_resolved{0};       ///< images spliced and hashed
  std::atomic<std::uint64_t> image_bytes_hashed{0};    ///< decoded bytes of data-URI images
  std::atomic<std::uint64_t> image_fallbacks{0};       ///< requests routed on their text before the first image
  std::atomic<std::uint64_t> image_urls_unresolved{0};  ///< image URLs with no fetcher, or too many waiting
  media_fetch_counters media;                           ///< the set's media fetcher (zero where it does not exist)
};

/// What a set's hashers share: loaded once by the watcher, read-only.
struct hasher_resources {
  std::shared_ptr<const tokenizer> text_tokenizer;  ///< null: only token-id prompts are hashed
  std::shared_ptr<const chat_template> chat;        ///< null: chats are rendered plainly or not at all
  bool chat_plain_fallback = false;                  ///< no template: render `role: content` lines
  /// The set's image rules: chats keep their content parts for the template, and each image's
  /// placeholder token is expanded and hashed (core/prompt/mm_splice). Unset: images are ignored.
  std::optional<multimodal_card> multimodal;
  /// The set's media fetcher for image URLs (multimodal sets only); shared by its hashers.
  std::shared_ptr<media_fetcher> fetcher;
  std::shared_ptr<hasher_counters> counters = std::make_shared<hasher_counters>();
  std::size_t max_prompt_tokens = SIZE_MAX;  ///< longer prompts (images expanded) are refused
  /// The fewest tokens a user or assistant message renders to with this set's template and
  /// tokenizer (core/prompt/chat_budget): a chat whose messages alone pass the limit is refused
  /// before it is rendered. 0: no early refusal.
  std::uint32_t chat_tokens_per_message = 0;

  /// Whether chat requests can be hashed (they need a tokenizer and a way to render).
  [[nodiscard]] bool hashes_chat() const { return text_tokenizer && (chat || chat_plain_fallback); }
  /// What ingress plans each request's prompt against.
  [[nodiscard]] prompt_capabilities capabilities() const {
    return {.tokenizer = text_tokenizer != nullptr, .chat = hashes_chat(), .images = multimodal.has_value()};
  }
};

/// Spawns one hasher of a set's pool; it decides each job in the scorer's core when that is
/// free, and forwards it to the scorer actor otherwise.
hasher_actor spawn_hasher(caf::actor_system& system, scorer_handle scorer, std::uint32_t block_size,
                          const hasher_resources& resources);

}  // namespace kvr
