#pragma once
/// The prefix index of one worker set: which workers cache which blocks, built from the workers'
/// KV events (or, in approximate mode, predicted from routing decisions), answering "how many
/// leading blocks of this prompt does each worker already cache?".
///
/// Design (docs/architecture.md §4, docs/benchmarks.md for figures):
/// - One entry per distinct chained sequence hash, holding a bitset of the workers that cache
///   it, in a flat hash map. A sequence hash identifies the whole prefix up to its block, so
///   matching a prompt is a walk over its sequence hashes with a running bitset intersection.
/// - Per worker, a flat map from the engine's opaque block hash to the entry, for parent
///   linkage and removals. Engine hashes differ between engines; the router's keys come from
///   the token ids.
/// - A hard bound on (worker, block) pairs. When full, entries are evicted in approximate LRU
///   order (CLOCK: stores and matches set a reference bit; the sweeping hand spares an entry
///   once per reference).

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/common/flat_u64_map.hpp"
#include "core/kv/kv_event.hpp"
#include "core/common/time.hpp"

namespace kvr {

/// What the index did with the events it was given; anything it could not apply is counted.
struct index_counters {
  std::uint64_t stored_blocks = 0;          ///< (worker, block) pairs added by stored events
  std::uint64_t removed_blocks = 0;         ///< pairs removed by removed events
  std::uint64_t cleared = 0;                ///< cleared events and removed workers
  std::uint64_t unknown_parent = 0;         ///< stored events whose parent the worker never stored (dropped)
  std::uint64_t unknown_removed = 0;        ///< removed hashes the worker never stored (ignored)
  std::uint64_t malformed_stored = 0;       ///< stored events with a foreign block size or token count (dropped)
  std::uint64_t evicted_entries = 0;        ///< entries dropped to keep within the bound
  std::uint64_t predicted_blocks = 0;       ///< pairs inserted in approximate mode
  std::uint64_t expired_blocks = 0;         ///< approximate pairs that reached their TTL
};

class prefix_index {
 public:
  /// Highest worker id + 1 the index accepts; ids are dense and assigned by the caller.
  static constexpr worker_id max_workers = 1u << 16;

  /// `block_size`: tokens per block (stored events with another size are dropped).
  /// `max_blocks`: hard bound on (worker, block) pairs, at least 1.
  /// `approx_ttl`: lifetime of a predicted pair in approximate mode.
  prefix_index(std::uint32_t block_size, std::uint64_t max_blocks, duration approx_ttl = std::chrono::seconds(120));

  /// Applies one event reported by `worker`. Returns false when the event was dropped (see
  /// counters); true when it was applied, including removals of unknown hashes.
  bool apply(worker_id worker, const kv_event& event);
  bool apply_stored(worker_id worker, const kv_stored& event);
  void apply_removed(worker_id worker, const kv_removed& event);
  void apply_cleared(worker_id worker);
  /// Starts loading what applying `events` for `worker` reads first, and changes nothing: each
  /// stored event's parent reference and entry, its blocks' slots in the worker's map and, when
  /// the decoder thread hashed its blocks, its first block's slot in the sequence-hash map. A
  /// batch of one-block events (one per running request, as engines send while decoding) waits
  /// on those misses one event after another otherwise; this way they overlap.
  void prefetch(worker_id worker, std::span<const kv_event> events) const;

  /// Drops every block of `worker` (the worker left the set).
  void remove_worker(worker_id worker);

  /// Approximate mode: records that `worker` will cache the prefix `sequence_hashes` (it was
  /// just routed there), valid until `now + approx_ttl`. Re-predicting refreshes the TTL.
  void insert_predicted(worker_id worker, std::span<const std::uint64_t> sequence_hashes, time_point now);
  /// Drops predicted pairs whose TTL has passed.
  void expire(time_point now);

  /// For each worker id (`overlap_blocks` is resized to the number of worker slots), the count
  /// of leading blocks of `sequence_hashes` it caches, stopping at its first missing block.
  /// Marks matched entries as recently used. Returns the longest overlap.
  std::uint32_t find_matches(std::span<const std::uint64_t> sequence_hashes, std::vector<std::uint32_t>& overlap_blocks);

  /// Whether `worker` caches the block whose sequence hash is `sequence_hash`.
  [[nodiscard]] bool contains(worker_id worker, std::uint64_t sequence_hash) const;
  /// The sequence hash of the block `worker` stored as `engine_hash`, while it caches it: the
  /// other KV-cache groups of a hybrid model chain their blocks onto the full-attention chain.
  [[nodiscard]] std::optional<std::uint64_t> sequence_hash_of(worker_id worker, std::uint64_t engine_hash) const;
  /// Appends the sequence hashes of every block `worker` caches (unordered).
  void collect_worker_blocks(worker_id worker, std::vector<std::uint64_t>& out) const;

  [[nodiscard]] std::uint64_t total_blocks() const { return total_blocks_; }
  [[nodiscard]] std::uint64_t worker_blocks(worker_id worker) const;
  [[nodiscard]] std::size_t entry_count() const { return by_sequence_hash_.size(); }
  [[nodiscard]] std::uint64_t max_blocks() const { return max_blocks_; }
  [[nodiscard]] std::uint32_t block_size() const { return block_size_; }
  [[nodiscard]] const index_counters& counters() const { return counters_; }
  /// Bytes held by the index's tables (capacity, not just size).
  [[nodiscard]] std::size_t memory_bytes() const;

 private:
  /// One distinct sequence hash, with the holder bits of workers 0-63 inline: a removal or a
  /// match step reads one entry, not an entry and a bitset elsewhere. 24 bytes; padded or
  /// aligned to 32 it measured no faster (docs/benchmarks.md).
  struct entry {
    std::uint64_t sequence_hash = 0;
    std::uint64_t holders = 0;          ///< bit w: worker w (< 64) caches the block; others in extra_holders_
    std::uint32_t generation = 0;       ///< bumped when the entry is dropped, invalidating references
    std::uint32_t worker_count : 31 = 0;  ///< workers caching the block; 0 = the entry is free
    std::uint32_t referenced : 1 = 0;     ///< CLOCK reference bit
    [[nodiscard]] bool in_use() const { return worker_count != 0; }
  };
  static_assert(sizeof(entry) == 24);
  /// A worker's reference to an entry, keyed by the engine's block hash (or, for predictions,
  /// the sequence hash). Stale once the entry's generation moves on. 8 bytes, so that a map slot
  /// is 16 and four share a cache line: with 24-byte slots about a third of the next slots lay
  /// on a line no prefetch had touched, where probes and backward shifts stepped on
  /// (docs/benchmarks.md).
  struct worker_block {
    std::uint32_t entry = 0;
    std::uint32_t generation = 0;
  };
  static_assert(sizeof(worker_block) == 8);
  struct worker_state {
    flat_u64_map<worker_block> blocks;
    /// Approximate mode: when each predicted pair expires, by the same key. A key absent here
    /// has no TTL (a KV event stored it). Kept apart so that KV-event maps stay small.
    flat_u64_map<std::int64_t> predicted_until;
    std::uint64_t live_blocks = 0;
    bool sweep_due = false;  ///< listed in sweep_due_
  };
  struct expiry {
    std::int64_t at_ns;
    worker_id worker;
    std::uint64_t key;
    friend bool operator>(const expiry& a, const expiry& b) { return a.at_ns > b.at_ns; }
  };

  worker_state& worker_slot(worker_id worker);
  [[nodiscard]] bool is_live(worker_id worker, const worker_block& ref) const;
  [[nodiscard]] bool has_bit(std::uint32_t entry_index, worker_id worker) const;
  /// Holder bits of workers [64 * word, 64 * word + 64) for an entry.
  [[nodiscard]] std::uint64_t& holder_word(std::uint32_t entry_index, std::size_t word);
  [[nodiscard]] std::uint64_t holder_word(std::uint32_t entry_index, std::size_t word) const;
  void grow_bitsets(std::size_t words);
  /// Adds (worker, sequence_hash) unless present; evicts first if the bound is reached.
  /// Returns the reference to store under the worker's key. Changes no worker's map.
  worker_block add_pair(worker_id worker, std::uint64_t sequence_hash);
  /// A KV event owns the pair under `key` from here on, or the pair is gone: it has no TTL.
  static void clear_ttl(worker_state& state, std::uint64_t key);
  /// A free entry (reused or appended) named `sequence_hash`, held by no worker yet.
  std::uint32_t new_entry(std::uint64_t sequence_hash);
  void remove_pair(worker_id worker, std::uint32_t entry_index);
  void drop_entry(std::uint32_t entry_index);
  void evict_one();
  /// Sweeps the stale references out of the maps of the workers listed in sweep_due_. Every
  /// operation that may drop entries calls it last.
  void sweep_due_workers();
  void compact_expiry_heap();

  std::uint32_t block_size_;
  std::uint64_t max_blocks_;
  duration approx_ttl_;

  /// Sequence hash -> entry. Its keys are the router's own xxh3-derived hashes, already well
  /// spread, so one multiplication places them.
  flat_u64_map<std::uint32_t, fibonacci_mix> by_sequence_hash_;
  static constexpr std::uint32_t no_entry = UINT32_MAX;  ///< a key add_pair is placing
  std::vector<entry> entries_;
  std::vector<std::uint64_t> extra_holders_;  ///< entries_.size() * (words_ - 1) words: workers 64 and up
  std::size_t words_ = 1;                     ///< holder words per entry: ceil(worker slots / 64)
  std::vector<std::uint32_t> free_entries_;
  std::size_t clock_hand_ = 0;
  std::vector<worker_state> workers_;
  std::vector<worker_id> sweep_due_;  ///< workers whose stale references outnumber their live ones
  std::vector<expiry> expiry_heap_;  ///< min-heap of predicted pairs by expiry
  std::uint64_t total_blocks_ = 0;
  index_counters counters_;

  // Reused scratch buffers (the index is single-threaded by contract).
  std::vector<std::uint64_t> scratch_sequence_;
  std::vector<std::uint32_t> scratch_entries_;
  std::vector<std::uint64_t> scratch_local_;
  std::vector<std::uint64_t> scratch_active_;
};

}  // namespace kvr
