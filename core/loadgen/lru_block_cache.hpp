#pragma once
/// A prefix cache of KV blocks with LRU eviction, counted as an engine counts its hits: a
/// prompt's leading cached blocks hit, its first missing block ends the match, and then every
/// block of the prompt is cached, most recently used (first block newest, so a prompt's tail is
/// evicted before its head, as vLLM frees blocks). Room taken by running sequences' outputs is
/// not modelled: the bounds it computes are upper bounds. `trace_cache_bounds` runs traces on it.

#include <cstdint>
#include <span>
#include <vector>

#include "core/common/flat_u64_map.hpp"

namespace kvr::loadgen {

class lru_block_cache {
 public:
  /// `capacity_blocks` 0 = unbounded.
  explicit lru_block_cache(std::uint64_t capacity_blocks);

  /// Serves one prompt, given its full blocks' keys in order (any u64 but ~0): returns how many
  /// leading blocks were cached, then caches them all.
  std::uint32_t serve(std::span<const std::uint64_t> blocks);

  [[nodiscard]] std::uint64_t size() const { return live_; }
  [[nodiscard]] std::uint64_t evictions() const { return evictions_; }

 private:
  static constexpr std::uint32_t none = UINT32_MAX;
  struct node {
    std::uint64_t key = 0;
    std::uint32_t newer = none;
    std::uint32_t older = none;
  };
  void unlink(std::uint32_t n);
  void push_newest(std::uint32_t n);
  void evict_oldest();

  std::uint64_t capacity_;
  flat_u64_map<std::uint32_t> index_;  ///< key + 1 -> node (the map keeps key 0 out of band)
  std::vector<node> nodes_;
  std::vector<std::uint32_t> free_;
  std::uint32_t newest_ = none;
  std::uint32_t oldest_ = none;
  std::uint64_t live_ = 0;
  std::uint64_t evictions_ = 0;
};

}  // namespace kvr::loadgen
