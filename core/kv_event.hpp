#pragma once
/// KV-cache events as the router's core sees them, independent of the wire encoding
/// (core/kv_wire decodes vLLM / SGLang msgpack into these; docs/kv-events.md has the format).

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace kvr {

/// Dense id of a worker (or one DP rank of a worker) inside its worker set's index.
using worker_id = std::uint32_t;

/// An image identifier attached to one block of a stored event (`extra_keys`).
struct block_image_hash {
  std::uint32_t block = 0;  ///< index into the event's blocks
  std::uint64_t hash = 0;   ///< the image's 64-bit hash (same as the request side computes)
};

/// `BlockStored`: the worker cached these full blocks. Engine hashes are opaque identities used
/// only to link parents and apply removals; the router hashes `token_ids` itself.
struct kv_stored {
  std::vector<std::uint64_t> block_hashes;        ///< engine hash per block
  std::optional<std::uint64_t> parent_block_hash;  ///< engine hash of the block before; none at sequence start
  std::vector<std::uint32_t> token_ids;           ///< block_hashes.size() * block_size tokens
  std::uint32_t block_size = 0;
  std::string lora_name;                          ///< empty = base model
  std::string cache_salt;                         ///< empty = none; applies to a sequence's first block
  std::vector<block_image_hash> images;           ///< image hashes per block, from extra_keys
};

/// `BlockRemoved`: the worker evicted these blocks.
struct kv_removed {
  std::vector<std::uint64_t> block_hashes;
};

/// `AllBlocksCleared`: the worker reset its prefix cache.
struct kv_cleared {};

using kv_event = std::variant<kv_stored, kv_removed, kv_cleared>;

}  // namespace kvr
