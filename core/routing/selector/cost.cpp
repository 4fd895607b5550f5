#include "core/routing/selector/cost.hpp"

#include <algorithm>

namespace kvr {

double kv_cost(const worker_candidate& candidate, const cost_params& params) {
  const double block_size = params.block_size == 0 ? 1.0 : params.block_size;
  const double request_blocks =
      params.block_size == 0 ? 0.0 : static_cast<double>((params.prompt_tokens + params.block_size - 1) / params.block_size);
  const double prefill_blocks =
      static_cast<double>(candidate.active_prefill_tokens) / block_size +
      std::max(0.0, request_blocks - params.overlap_score_credit * (params.gpu_weight * static_cast<double>(candidate.overlap_blocks) +
                                                                    candidate.lower_tier_blocks));
  const double decode_blocks = static_cast<double>(candidate.active_decode_blocks) +
                               std::max(0.0, request_blocks - static_cast<double>(candidate.active_overlap_blocks));
  const double queued_blocks = std::max(0.0, candidate.engine_queued_requests) * request_blocks;
  return params.prefill_load_scale * (prefill_blocks + params.engine_queue_weight * queued_blocks) + decode_blocks +
         params.eviction_weight * static_cast<double>(candidate.evicted_blocks);
}

double booked_load(const worker_candidate& candidate, std::uint32_t block_size) {
  const double bs = block_size == 0 ? 1.0 : block_size;
  return static_cast<double>(candidate.active_prefill_tokens) / bs + static_cast<double>(candidate.active_decode_blocks);
}

}  // namespace kvr
