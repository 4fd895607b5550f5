#pragma once
/// Blocks the engines publish on tiers below the GPU: host memory (vLLM's OffloadingConnector
/// `CPU`, SGLang HiCache's `CPU_PINNED`, LMCache's `CPU`), disk (`STORAGE`, `DISK`) or an
/// external store (`EXTERNAL`). An engine loads such a block instead of computing it, so a hit
/// there still saves most of its prefill: the cost credits it by the tier's weight
/// (`tier_weights`) where the GPU chain ends, for as long as the prompt's blocks are on some tier.
///
/// Kept per tier and worker, keyed by the sequence hash at each block's end (the GPU chain's,
/// where the parent is there; else the tiers' own). A block on several tiers counts its best.
/// Each tier holds at most `max_blocks` (worker, block) pairs, the oldest stored going first;
/// a worker whose tier has never sent a removal (LMCache sends none) forgets its blocks there
/// `ttl` after they were stored.

#include <cstdint>
#include <deque>
#include <span>
#include <string_view>
#include <vector>

#include "core/common/time.hpp"
#include "core/config/router_config.hpp"
#include "core/kv/kv_event.hpp"
#include "core/routing/sequence_blocks.hpp"

namespace kvr {

class prefix_index;

enum class kv_tier : std::uint8_t { gpu, host, disk, external, unknown };

/// Every spelling the engines send: `GPU` (or none); `CPU`, `CPU_PINNED`, `HOST`; `STORAGE`,
/// `DISK`, `SSD`; `EXTERNAL`, `REMOTE`. Case-insensitive. Anything else is unknown.
[[nodiscard]] kv_tier kv_tier_of(std::string_view medium);

struct kv_tier_counters {
  std::uint64_t stored_blocks = 0;
  std::uint64_t removed_blocks = 0;
  std::uint64_t unknown_tier_events = 0;  ///< a medium this router does not know (kept out)
  std::uint64_t unknown_parent = 0;
  std::uint64_t aged_out = 0;   ///< forgotten after the TTL (a tier that sends no removals)
  std::uint64_t pushed_out = 0;  ///< forgotten to stay within the bound
};

class kv_tiers {
 public:
  kv_tiers(std::uint32_t block_size, std::uint64_t max_blocks, duration ttl);

  /// A store on a tier below the GPU. False when it was not applied (counted).
  bool apply_stored(worker_id worker, const kv_stored& event, const prefix_index& gpu_chain, time_point now);
  void apply_removed(worker_id worker, const kv_removed& event);
  void clear(worker_id worker);
  /// Forgets what the TTL and the bound say to.
  void expire(time_point now);
  /// A retuned `lower_tier_ttl_secs`: applies from the next expire on.
  void set_ttl(duration ttl) { ttl_ = ttl; }

  /// The credit of the prompt's blocks past `gpu_blocks` that `worker` holds on lower tiers, in
  /// GPU blocks: the tier weight of each block, the best tier's, until a block is on none.
  [[nodiscard]] double credit(worker_id worker, std::span<const std::uint64_t> sequence_hashes, std::uint32_t gpu_blocks,
                              const kv_tier_weights& weights) const;
  /// Blocks past `gpu_blocks` that `worker` holds on some lower tier, in a row.
  [[nodiscard]] std::uint32_t lower_tier_run(worker_id worker, std::span<const std::uint64_t> sequence_hashes,
                                             std::uint32_t gpu_blocks) const;

  [[nodiscard]] bool empty() const { return stored_ == 0; }
  [[nodiscard]] std::uint64_t blocks(kv_tier tier) const;
  [[nodiscard]] const kv_tier_counters& counters() const { return counters_; }

 private:
  static constexpr int tiers = 3;  ///< host, disk, external
  struct worker_blocks {
    sequence_blocks blocks;  ///< each tagged with the store it came from, to tell a stale FIFO entry
    bool sent_removals = false;
  };
  struct stored_entry {
    std::int64_t at_ns;
    worker_id worker;
    std::uint64_t engine_hash;
    std::uint32_t stamp;
  };
  struct tier_store {
    std::vector<worker_blocks> workers;
    std::deque<stored_entry> order;  ///< oldest first, with stale entries skipped
    std::uint64_t pairs = 0;
  };

  [[nodiscard]] static int slot_of(kv_tier tier) { return static_cast<int>(tier) - 1; }
  /// Forgets the block `engine_hash` names on a tier; false if it named none.
  bool unlink(tier_store& store, worker_blocks& mine, std::uint64_t engine_hash);
  [[nodiscard]] double best_weight(worker_id worker, std::uint64_t sequence_hash, const kv_tier_weights& weights) const;

  std::uint32_t block_size_;
  std::uint64_t max_blocks_;
  duration ttl_;
  tier_store stores_[tiers];
  std::uint64_t stored_ = 0;
  std::uint32_t next_stamp_ = 0;
  kv_tier_counters counters_;
  std::vector<std::uint64_t> scratch_local_, scratch_sequence_;
};

}  // namespace kvr
