#pragma once
/// The KV-cache groups of a hybrid model beyond full attention, and what they let a worker
/// really reuse of a prompt.
///
/// vLLM gives every group of layers of one kind (full attention, a sliding window, mamba) its
/// own blocks and publishes each group's stores and removals with its `group_idx` and
/// `kv_cache_spec_kind`. Every group caches the same tokens under the same engine block hashes,
/// but each group evicts on its own: a sliding-window group frees a block once it falls out of
/// the window; a mamba group keeps one state per chunk and few of them. Put into one chain, a
/// sliding-window group's removals cut the full-attention chain, and a mamba group's stores claim
/// prefixes nobody can serve (a public router routed every request of a Kimi deployment to one
/// worker that way).
///
/// So the prefix index keeps the full-attention chain (every full-attention group, and events
/// that name no group), and this keeps each other group's blocks per worker, keyed by the
/// sequence hash of the chain at that block's end. A prompt's usable prefix on a worker is then
/// what vLLM's hybrid coordinator finds (`find_longest_cache_hit`), repeated until every group
/// agrees:
/// - full attention: the leading run of blocks the chain holds (the index's overlap);
/// - a sliding window of W tokens, blocks of B: the end of the last run of `ceil((W - 1) / B)`
///   cached blocks at or before the current length, or, with no such run, the leading run;
/// - mamba: the end of the last block at or before the current length whose state is cached.
///
/// Kinds this router does not know (chunked local attention, cross attention, ...) are counted
/// and kept out: they neither enter a chain nor limit one.

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "core/kv/kv_event.hpp"
#include "core/routing/sequence_blocks.hpp"

namespace kvr {

class prefix_index;

/// Whether a stored event goes to the full-attention chain of the prefix index.
[[nodiscard]] inline bool joins_the_full_attention_chain(const kv_stored& event) {
  return kv_group_kind_of(event.kv_cache_spec_kind) == kv_group_kind::full_attention;
}

/// What happened to one event of a group other than full attention.
enum class group_store_outcome : std::uint8_t {
  applied,
  unknown_kind,        ///< a kind this router does not know
  unknown_parent,      ///< its parent is in neither the chain nor the group
  foreign_block_size,  ///< not a multiple of the index's block size, or images on a larger block
  over_bound,          ///< the group holds as many blocks as the index may
};

/// Counters of the groups, for /v1/router/sets and kv-index.
struct kv_group_counters {
  std::uint64_t stored_blocks = 0;
  std::uint64_t removed_blocks = 0;
  std::uint64_t unknown_kind_events = 0;
  std::uint64_t unknown_parent = 0;
  std::uint64_t foreign_block_size = 0;
  std::uint64_t over_bound = 0;
};

/// One group the set has learned from the events.
struct kv_group_info {
  std::int64_t group_idx = 0;
  kv_group_kind kind = kv_group_kind::unknown;
  std::uint32_t window_tokens = 0;  ///< sliding windows: the window, from the events
  std::uint32_t block_size = 0;     ///< the group's own block size, as its events give it
  std::uint64_t blocks = 0;         ///< (worker, block) pairs held
};

class kv_groups {
 public:
  /// Groups a set learns at most: models have a handful; an engine that names more is counted
  /// and its extra groups kept out (each costs a scan per event).
  static constexpr std::size_t max_groups = 64;

  /// `block_size`: the index's; `max_blocks`: the bound on each group's (worker, block) pairs.
  kv_groups(std::uint32_t block_size, std::uint64_t max_blocks);

  /// A store of a group other than full attention, chained onto `chain` (the prefix index)
  /// where its parent is there, else onto the group's own blocks.
  group_store_outcome apply_stored(worker_id worker, const kv_stored& event, const prefix_index& chain);
  /// Whether a removal belongs to a group here rather than to the chain: it names a group that
  /// is not full attention, or one never seen stored (which put nothing into the chain: every
  /// store names its group). A removal naming no group, or a full-attention group, is the chain's.
  [[nodiscard]] bool owns_removal(const kv_removed& event) const;
  /// A removal `owns_removal` gave here.
  void apply_removed(worker_id worker, const kv_removed& event);
  /// Learns a group's kind from a store of the full-attention chain, so that its removals stay
  /// the chain's.
  void note_group(std::int64_t group_idx, kv_group_kind kind);
  [[nodiscard]] std::optional<kv_group_kind> kind_of_group(std::int64_t group_idx) const;
  /// The worker cleared its cache, or left.
  void clear(worker_id worker);

  /// Lowers each worker's `overlap_blocks` (the chain's leading run, by worker slot) to the
  /// prefix every group can serve, given the prompt's `sequence_hashes`. Nothing to do (and
  /// nothing done) while the set has seen no group but full attention.
  void limit_overlaps(std::span<const std::uint64_t> sequence_hashes, std::span<std::uint32_t> overlap_blocks) const;
  /// The usable prefix of `worker`, in blocks of the index, of a chain overlap of `chain_blocks`.
  [[nodiscard]] std::uint32_t usable_blocks(worker_id worker, std::span<const std::uint64_t> sequence_hashes,
                                            std::uint32_t chain_blocks) const;

  [[nodiscard]] bool empty() const { return groups_.empty(); }
  [[nodiscard]] std::vector<kv_group_info> groups() const;
  [[nodiscard]] const kv_group_counters& counters() const { return counters_; }
  [[nodiscard]] std::size_t memory_bytes() const;

 private:
  struct group {
    std::int64_t idx = 0;
    kv_group_kind kind = kv_group_kind::unknown;
    std::uint32_t window_tokens = 0;
    std::uint32_t block_size = 0;
    std::uint64_t pairs = 0;
    std::vector<sequence_blocks> workers;
  };

  group* find_group(std::int64_t idx);
  [[nodiscard]] const group* find_group(std::int64_t idx) const;
  group& group_of(const kv_stored& event, kv_group_kind kind);
  [[nodiscard]] bool group_holds(const group& g, worker_id worker, std::uint64_t sequence_hash) const;
  /// The prefix `g` can serve of the first `length` blocks (the index's) on `worker`.
  [[nodiscard]] std::uint32_t group_limit(const group& g, worker_id worker, std::span<const std::uint64_t> sequence_hashes,
                                          std::uint32_t length) const;
  void unlink(group& g, sequence_blocks& blocks, std::uint64_t engine_hash);

  std::uint32_t block_size_;
  std::uint64_t max_blocks_;
  std::vector<group> groups_;
  std::vector<std::pair<std::int64_t, kv_group_kind>> kinds_;  ///< every group seen, full attention too
  kv_group_counters counters_;
  std::vector<std::uint64_t> scratch_local_, scratch_sequence_;
};

}  // namespace kvr
