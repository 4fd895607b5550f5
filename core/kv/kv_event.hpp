#pragma once
/// KV-cache events as the router's core sees them, independent of the wire encoding
/// (core/kv/kv_wire decodes vLLM / SGLang msgpack into these; docs/kv-events.md has the format).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kvr {

/// Dense id of a worker (or one DP rank of a worker) inside its worker set's index.
using worker_id = std::uint32_t;

/// An image attached to one block of a stored event (`extra_keys`).
struct block_image_hash {
  std::uint32_t block = 0;  ///< index into the event's blocks
  std::uint64_t hash = 0;   ///< the image's 64-bit hash (same as the request side computes)
  std::int64_t offset = 0;  ///< the image's start relative to the block (engines' offset; may be < 0)
  std::string identifier;   ///< the engine's identifier, as sent (for operators' dumps)

  friend bool operator==(const block_image_hash&, const block_image_hash&) = default;
};

/// `BlockStored`: the worker cached these full blocks. Engine hashes are opaque identities used
/// only to link parents and apply removals; the router hashes `token_ids` itself.
struct kv_stored {
  std::vector<std::uint64_t> block_hashes;        ///< engine hash per block
  std::optional<std::uint64_t> parent_block_hash;  ///< engine hash of the block before; none at sequence start
  std::vector<std::uint32_t> token_ids;           ///< block_hashes.size() * block_size tokens (see local_hashes)
  std::uint32_t block_size = 0;
  std::string lora_name;                          ///< empty = base model
  std::string cache_salt;                         ///< empty = none; applies to a sequence's first block
  std::vector<block_image_hash> images;           ///< image hashes per block, from extra_keys
  std::optional<std::int64_t> lora_id;            ///< deprecated engine field, kept for dumps
  std::string medium;                             ///< storage tier; empty = not sent (GPU)
  std::optional<std::int64_t> group_idx;          ///< KV-cache group (hybrid models)
  std::string kv_cache_spec_kind;                 ///< e.g. full_attention; empty = not sent
  std::optional<std::int64_t> sliding_window;
  /// The router's local hash per block (core/kv/stored_block_hashes), when the decoder thread
  /// computed them; empty: the index computes them. Not on the wire. Once they are computed,
  /// `token_ids` may be released (release_hashed_token_ids): the index reads nothing else of them.
  std::vector<std::uint64_t> local_hashes;

  friend bool operator==(const kv_stored&, const kv_stored&) = default;
};

/// Whether the event's tokens fill its blocks, which the index needs to key them: by its token
/// ids, or by its local hashes once a decoder thread hashed the blocks (and perhaps released the
/// ids); those are only ever computed for events whose tokens filled their blocks.
inline bool fills_its_blocks(const kv_stored& event) {
  return event.token_ids.size() == event.block_hashes.size() * event.block_size ||
         (!event.local_hashes.empty() && event.local_hashes.size() == event.block_hashes.size());
}

/// `BlockRemoved`: the worker evicted these blocks.
struct kv_removed {
  std::vector<std::uint64_t> block_hashes;
  std::string medium;                     ///< storage tier; empty = not sent (GPU)
  std::optional<std::int64_t> group_idx;

  friend bool operator==(const kv_removed&, const kv_removed&) = default;
};

/// `AllBlocksCleared`: the worker reset its prefix cache.
struct kv_cleared {
  friend bool operator==(kv_cleared, kv_cleared) = default;
};

using kv_event = std::variant<kv_stored, kv_removed, kv_cleared>;

/// One published batch: what one engine scheduler step produced.
struct kv_batch {
  double timestamp = 0;                 ///< engine wall clock, seconds
  std::optional<std::int64_t> dp_rank;  ///< data-parallel rank, when sent
  std::vector<kv_event> events;
  std::uint32_t unknown_events = 0;     ///< events with a tag this router does not know (skipped)
  std::uint32_t malformed_events = 0;   ///< known events whose fields are wrong (skipped)
  std::string first_error;              ///< what was wrong with the first malformed event

  /// Field by field (a NaN timestamp is unequal to itself, as doubles are).
  friend bool operator==(const kv_batch&, const kv_batch&) = default;
};

/// What a KV-cache group's blocks need to be of use, by vLLM's `kv_cache_spec_kind`
/// (core/routing/kv_groups says how each is matched).
enum class kv_group_kind : std::uint8_t {
  full_attention,  ///< `full_attention`, `mla_attention`, `sink_full_attention`, or no kind sent
  sliding_window,  ///< `sliding_window`, `sliding_window_mla`: the window's last blocks
  mamba,           ///< `mamba`: a stored state at the match's end
  unknown,         ///< anything else (`chunked_local_attention`, ...): counted, never indexed
};

[[nodiscard]] inline kv_group_kind kv_group_kind_of(std::string_view spec_kind) {
  if (spec_kind.empty() || spec_kind == "full_attention" || spec_kind == "mla_attention" ||
      spec_kind == "sink_full_attention")
    return kv_group_kind::full_attention;
  if (spec_kind == "sliding_window" || spec_kind == "sliding_window_mla") return kv_group_kind::sliding_window;
  if (spec_kind == "mamba") return kv_group_kind::mamba;
  return kv_group_kind::unknown;
}

/// Whether an event's tier is the GPU cache the prefix index models: "GPU" or not sent.
[[nodiscard]] inline bool is_gpu_tier(const std::string& medium) { return medium.empty() || medium == "GPU"; }

}  // namespace kvr
