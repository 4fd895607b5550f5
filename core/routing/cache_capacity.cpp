#include "core/routing/cache_capacity.hpp"

#include <algorithm>
#include <limits>

namespace kvr {

void cache_capacity::set_reported(std::size_t worker, std::uint64_t blocks, std::uint32_t ranks) {
  if (worker >= workers_.size()) return;
  // The figure comes from the worker's /metrics: saturate rather than wrap a hostile one.
  const std::uint64_t n = std::max<std::uint32_t>(1, ranks);
  workers_[worker].reported = blocks > std::numeric_limits<std::uint64_t>::max() / n ? std::numeric_limits<std::uint64_t>::max() : blocks * n;
}

void cache_capacity::observe(std::size_t worker, std::uint64_t resident, std::uint64_t removed_events) {
  if (worker >= workers_.size()) return;
  worker_cache& w = workers_[worker];
  w.peak = std::max(w.peak, resident);
  if (removed_events > w.removed) w.evicts = true;
  w.removed = removed_events;
}

std::optional<std::uint64_t> cache_capacity::capacity(std::size_t worker) const {
  if (worker >= workers_.size()) return std::nullopt;
  const worker_cache& w = workers_[worker];
  if (w.reported > 0) return w.reported;
  if (w.evicts && w.peak > 0) return w.peak;
  return std::nullopt;
}

std::uint64_t cache_capacity::evicted_by(std::size_t worker, std::uint64_t resident, std::uint64_t new_blocks) const {
  const auto total = capacity(worker);
  if (!total) return 0;
  const std::uint64_t room = *total > resident ? *total - resident : 0;
  return new_blocks > room ? new_blocks - room : 0;
}

}  // namespace kvr
