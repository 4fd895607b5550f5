#pragma once
/// The kv-mode cost of sending a request to one worker (docs/architecture.md §5):
///
///     prefill_blocks = active_prefill_tokens / bs
///                      + max(0, ceil(isl / bs) - credit * (gpu_weight * overlap + lower_tier_blocks))
///     decode_blocks  = active_decode_blocks + ceil(isl / bs) - active_overlap
///     queued_blocks  = engine_queued_requests * ceil(isl / bs)
///     cost           = prefill_load_scale * (prefill_blocks + engine_queue_weight * queued_blocks)
///                      + decode_blocks + eviction_weight * evicted_blocks
///
/// Lower is better. With credit 0 the cost is purely load-based. `active_overlap` is how much
/// of the prompt the worker already holds for its in-flight requests: an engine shares those
/// blocks, so they add no KV load (as Dynamo counts potential blocks). Without it, a worker
/// running one request of a group would look a whole prompt busier than an idle one, and the
/// group would be sent away from its cache as soon as it had traffic. `evicted_blocks` is how
/// many cached blocks the prompt's new blocks would push out of the worker's full cache
/// (core/routing/cache_capacity): hits later requests lose, a cost beyond this request's work.
/// `engine_queued_requests` prices what an engine says it has waiting that the router did not
/// send (another router's, clients that bypass it), each as long as this prompt: a queue is
/// priced, not obeyed (a worker with one such request waiting is dearer, not unroutable).

#include <cstdint>

#include "core/kv/kv_event.hpp"

namespace kvr {

/// One worker as the selector sees it: what it caches of this prompt and what it is busy with.
struct worker_candidate {
  worker_id worker = 0;
  std::uint32_t overlap_blocks = 0;
  std::uint64_t active_prefill_tokens = 0;
  std::uint64_t active_decode_blocks = 0;
  std::uint32_t active_overlap_blocks = 0;  ///< of this prompt's blocks, those its in-flight requests hold
  std::uint64_t evicted_blocks = 0;  ///< cached blocks this prompt would evict there (0: room, or capacity unknown)
  /// Requests its engine's last scrape reports waiting beyond this router's own requests not yet
  /// started there: work ahead of this prompt that no booking accounts for.
  double engine_queued_requests = 0;
  /// The prompt's blocks past `overlap_blocks` the worker holds on lower tiers (host, disk,
  /// external), each counted at its tier's weight (core/routing/kv_tiers).
  double lower_tier_blocks = 0;
};

/// The request-side inputs of the cost.
struct cost_params {
  std::uint32_t prompt_tokens = 0;
  std::uint32_t block_size = 16;
  double overlap_score_credit = 1.0;
  double prefill_load_scale = 1.0;
  double eviction_weight = 8.0;
  double engine_queue_weight = 1.0;
  double gpu_weight = 1.0;  ///< tier_weights' gpu
};

[[nodiscard]] double kv_cost(const worker_candidate& candidate, const cost_params& params);

/// The load that the load-only policies (power-of-two, least-loaded) compare: booked work in
/// blocks, prefill and decode alike.
[[nodiscard]] double booked_load(const worker_candidate& candidate, std::uint32_t block_size);

}  // namespace kvr
