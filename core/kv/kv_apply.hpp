#pragma once
/// Applies decoded KV-event batches of one worker to a prefix index: GPU-tier events of full
/// blocks go in; events for other tiers (CPU, disk, ...) and partial blocks are counted and
/// kept out, since the index models what a worker can serve from its GPU cache. A hybrid
/// model's groups other than full attention (sliding windows, mamba) go to `kv_groups`, never
/// into the full-attention chain.

#include <cstdint>
#include <span>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/kv/kv_event.hpp"
#include "core/routing/kv_groups.hpp"
#include "core/routing/kv_tiers.hpp"
#include "core/routing/prefix_index.hpp"

namespace kvr {

/// Per-worker event counters (what the workers sent, as opposed to what the index did).
struct kv_event_counters {
  std::uint64_t batches = 0;
  std::uint64_t stored_events = 0;
  std::uint64_t removed_events = 0;
  std::uint64_t cleared_events = 0;
  std::uint64_t unknown_events = 0;    ///< tags the router does not know
  std::uint64_t malformed_events = 0;  ///< known tags with wrong fields
  std::uint64_t other_tier_events = 0; ///< events for CPU / disk / external tiers (kept per tier, not in the GPU chain)
  std::uint64_t partial_blocks = 0;    ///< stored events whose tokens do not fill their blocks
  std::uint64_t dropped_stored = 0;    ///< stored events the index refused (unknown parent, block size)
  std::uint64_t other_group_events = 0;  ///< stores and removals of groups other than full attention
  std::uint64_t unknown_group_kind_events = 0;  ///< stores of a kind this router does not know (kept out)
};

/// Applies `batch`, reported by `worker`, to `index`, `groups` and `tiers`, counting into
/// `counters`. Without `groups`, stores of other groups are counted and dropped; without
/// `tiers`, events of other tiers are. `now` stamps lower-tier stores (their TTL).
void apply_batch(prefix_index& index, worker_id worker, const kv_batch& batch, kv_event_counters& counters,
                 kv_groups* groups = nullptr, kv_tiers* tiers = nullptr, time_point now = {});

[[nodiscard]] nlohmann::json to_json(const kv_event_counters& counters);
[[nodiscard]] nlohmann::json to_json(const index_counters& counters);
/// The groups learned, with their kinds, windows, block sizes and blocks, and their counters.
[[nodiscard]] nlohmann::json to_json(const kv_groups& groups);
/// Blocks held per lower tier, and the tiers' counters.
[[nodiscard]] nlohmann::json to_json(const kv_tiers& tiers);

/// The index's contents for operators and tests: per worker (named by `worker_names[id]`),
/// its block count and sorted sequence hashes, plus the index counters.
[[nodiscard]] nlohmann::json dump_index(const prefix_index& index, std::span<const std::string> worker_names);

}  // namespace kvr
