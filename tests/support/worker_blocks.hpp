#pragma once
/// A worker's blocks in a prefix index, sorted: what tests compare two indexes by.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/routing/prefix_index.hpp"

namespace kvr {

inline std::vector<std::uint64_t> sorted_worker_blocks(const prefix_index& index, worker_id worker) {
  std::vector<std::uint64_t> out;
  index.collect_worker_blocks(worker, out);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace kvr
