#pragma once
/// The simulated engine's paged KV cache, modelled on vLLM's prefix caching: fixed-size blocks,
/// full prompt blocks identified by a chained hash and shared by every sequence that starts with
/// them, reference counts while sequences run, and LRU eviction of unreferenced blocks in which
/// a finished sequence's suffix goes before its prefix. Every change a real engine would publish
/// is appended to a KV-event batch.
///
/// The engine's block hash is its own (XXH64 over the tokens, seeded by the parent's hash), not
/// the router's formula: the router must recompute its hashes from the token ids, as it does for
/// real engines.

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/kv/block_hash.hpp"
#include "core/kv/kv_event.hpp"

namespace kvr::mocker {

/// The blocks a running sequence holds.
struct block_allocation {
  std::vector<std::uint64_t> cached_blocks;  ///< prompt blocks, by engine hash (pinned)
  std::uint32_t private_blocks = 0;          ///< the partial last prompt block and decode blocks
  std::uint32_t reused_blocks = 0;           ///< how many leading prompt blocks were already cached
  std::uint32_t loaded_blocks = 0;           ///< the prompt's blocks after those, loaded from the host tier
};

/// One cached block as a dump shows it.
struct cached_block {
  std::uint64_t engine_hash = 0;
  std::uint64_t router_sequence_hash = 0;  ///< what kvrouter's index should hold for it
  std::uint32_t references = 0;
};

/// The groups of a hybrid model beside full attention (group 0), as vLLM publishes them: a
/// sliding window (group 1) that keeps only each prompt's last blocks within its window, and a
/// mamba group (group 2) that keeps one state per prompt, at its last full block, for a bounded
/// number of prompts. A prompt's cache hit is then what every group serves (vLLM's hybrid
/// coordinator; core/routing/kv_groups is the router's side of it).
struct hybrid_groups {
  std::uint32_t sliding_window_tokens = 0;  ///< 0: no sliding-window group
  bool mamba = false;
  std::uint32_t mamba_states = 0;           ///< states kept at most (0: a quarter of the blocks)
  [[nodiscard]] bool any() const { return sliding_window_tokens > 0 || mamba; }
};

/// A host-memory tier below the GPU cache, as vLLM's OffloadingConnector keeps one: a block the
/// GPU evicts is copied there (BlockStored, medium `CPU`), the tier evicts its oldest beyond
/// `cpu_blocks` (BlockRemoved, `CPU`), and a prompt whose next blocks are there loads them
/// instead of computing them.
struct offload_tier {
  std::uint32_t cpu_blocks = 0;  ///< 0: no host tier
};

class paged_cache {
 public:
  paged_cache(std::uint32_t num_blocks, std::uint32_t block_size, hybrid_groups hybrid = {}, offload_tier offload = {});

  [[nodiscard]] std::uint32_t block_size() const { return block_size_; }
  [[nodiscard]] std::uint32_t num_blocks() const { return num_blocks_; }

  /// Engine hashes of the prompt's full blocks; an image's hash changes every block it covers.
  [[nodiscard]] std::vector<std::uint64_t> engine_hashes(std::span<const std::uint32_t> tokens,
                                                         std::span<const image_span> images = {}) const;
  /// How many leading blocks of `hashes` are cached now.
  [[nodiscard]] std::uint32_t cached_prefix(std::span<const std::uint64_t> hashes) const;
  /// Blocks a sequence needs in all: its prompt's plus room for `max_new_tokens`.
  [[nodiscard]] std::uint32_t blocks_needed(std::size_t prompt_tokens, std::uint32_t max_new_tokens) const;

  /// Pins the cached prefix, evicts what it must (LRU, BlockRemoved per block), stores the new
  /// full prompt blocks (one BlockStored) and reserves the rest. Nullopt, with nothing changed,
  /// if the free blocks do not suffice now.
  /// `images`: placeholder runs already expanded in `tokens`; stored blocks report them in
  /// `extra_keys` as vLLM does (identifier: a 64-hex digest whose first 16 digits are the hash).
  std::optional<block_allocation> allocate(std::span<const std::uint32_t> tokens, std::uint32_t max_new_tokens,
                                           std::vector<kv_event>& events, std::span<const image_span> images = {});
  /// A sequence finished: its prompt blocks stay cached but become evictable, suffix first.
  void release(const block_allocation& allocation);
  /// An engine restart: everything gone, no events (the restart itself is the signal).
  void reset();

  /// Blocks held by running sequences, as a fraction of all (vLLM's KV-cache usage).
  [[nodiscard]] double usage() const;
  [[nodiscard]] std::size_t cached_blocks() const { return blocks_.size(); }
  [[nodiscard]] std::vector<cached_block> dump() const;

 private:
  struct block {
    std::uint64_t router_sequence_hash = 0;
    std::uint32_t references = 0;
    std::list<std::uint64_t>::iterator lru;  ///< valid while references == 0
    std::optional<std::uint64_t> parent;     ///< with a host tier: what an offloaded copy names
    std::vector<std::uint32_t> tokens;       ///< with a host tier: what an offloaded copy carries
  };
  /// Copies an evicted GPU block to the host tier (offload), evicting the tier's oldest.
  void offload(std::uint64_t hash, block& evicted, std::vector<kv_event>& events);
  [[nodiscard]] std::uint32_t free_blocks() const;
  void pin(std::uint64_t hash);
  void evict_one(std::vector<kv_event>& events);
  /// What every group serves of a full-attention hit of `full_hit` blocks of `hashes`.
  [[nodiscard]] std::uint32_t hybrid_hit(std::span<const std::uint64_t> hashes, std::uint32_t full_hit) const;
  /// The blocks before a prefix's end a window needs: ceil((window - 1) / block size), at least 1.
  [[nodiscard]] std::uint32_t window_blocks_needed() const;
  [[nodiscard]] std::uint32_t window_hit(std::span<const std::uint64_t> hashes, std::uint32_t length) const;
  [[nodiscard]] std::uint32_t mamba_hit(std::span<const std::uint64_t> hashes, std::uint32_t length) const;
  /// The other groups' stores and drops for a prompt whose blocks [first, full) were just stored.
  void store_in_groups(std::span<const std::uint32_t> tokens, std::span<const std::uint64_t> hashes, std::uint32_t first,
                       std::uint32_t full, std::vector<kv_event>& events);
  void forget_in_groups(std::uint64_t hash, std::vector<kv_event>& events);

  std::uint32_t num_blocks_;
  std::uint32_t block_size_;
  std::unordered_map<std::uint64_t, block> blocks_;  ///< cached full blocks by engine hash
  std::list<std::uint64_t> evictable_;                ///< unreferenced cached blocks, next victim first
  std::uint32_t pinned_ = 0;                          ///< cached blocks with references > 0
  std::uint32_t private_ = 0;                         ///< uncached blocks of running sequences
  hybrid_groups hybrid_;
  std::unordered_set<std::uint64_t> window_blocks_;        ///< the sliding-window group's blocks
  std::unordered_map<std::uint64_t, std::list<std::uint64_t>::iterator> mamba_states_;  ///< by block hash
  std::list<std::uint64_t> mamba_order_;                   ///< oldest state first
  offload_tier offload_;
  std::unordered_map<std::uint64_t, std::list<std::uint64_t>::iterator> host_blocks_;  ///< the host tier, by hash
  std::list<std::uint64_t> host_order_;                                               ///< oldest first
};

}  // namespace kvr::mocker
