#include "core/routing/selector/candidates.hpp"

#include <algorithm>

namespace kvr {

void overlaps_by_worker(std::span<const std::uint32_t> publisher_overlaps, std::span<const std::uint32_t> publisher_worker,
                        std::size_t workers, std::vector<std::uint32_t>& out) {
  out.assign(workers, 0);
  const std::size_t n = std::min(publisher_overlaps.size(), publisher_worker.size());
  for (std::size_t p = 0; p < n; ++p) {
    const std::uint32_t w = publisher_worker[p];
    if (w < workers) out[w] = std::max(out[w], publisher_overlaps[p]);
  }
}

void collect_candidates(std::span<const std::uint32_t> worker_overlaps, std::span<const worker_load> loads,
                        std::span<const std::uint8_t> healthy, std::span<const std::uint32_t> excluded,
                        std::vector<worker_candidate>& out, std::span<const std::uint32_t> active_overlaps) {
  out.clear();
  for (std::uint32_t w = 0; w < healthy.size(); ++w) {
    if (!healthy[w] || std::find(excluded.begin(), excluded.end(), w) != excluded.end()) continue;
    const worker_load load = w < loads.size() ? loads[w] : worker_load{};
    out.push_back({.worker = w,
                   .overlap_blocks = w < worker_overlaps.size() ? worker_overlaps[w] : 0,
                   .active_prefill_tokens = load.prefill_tokens,
                   .active_decode_blocks = load.decode_blocks,
                   .active_overlap_blocks = w < active_overlaps.size() ? active_overlaps[w] : 0});
  }
}

}  // namespace kvr
