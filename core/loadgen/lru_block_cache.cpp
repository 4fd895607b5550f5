#include "core/loadgen/lru_block_cache.hpp"

namespace kvr::loadgen {

lru_block_cache::lru_block_cache(std::uint64_t capacity_blocks)
    : capacity_(capacity_blocks == 0 ? UINT64_MAX : capacity_blocks) {}

void lru_block_cache::unlink(std::uint32_t n) {
  node& x = nodes_[n];
  if (x.newer != none) nodes_[x.newer].older = x.older;
  else newest_ = x.older;
  if (x.older != none) nodes_[x.older].newer = x.newer;
  else oldest_ = x.newer;
  x.newer = x.older = none;
}

void lru_block_cache::push_newest(std::uint32_t n) {
  node& x = nodes_[n];
  x.newer = none;
  x.older = newest_;
  if (newest_ != none) nodes_[newest_].newer = n;
  newest_ = n;
  if (oldest_ == none) oldest_ = n;
}

void lru_block_cache::evict_oldest() {
  const std::uint32_t n = oldest_;
  unlink(n);
  index_.erase(nodes_[n].key + 1);
  free_.push_back(n);
  --live_;
  ++evictions_;
}

std::uint32_t lru_block_cache::serve(std::span<const std::uint64_t> blocks) {
  // The leading cached blocks hit. The prompt's cached blocks are in use (an engine pins them),
  // so none is evicted for its new ones: they are made the newest first.
  std::uint32_t hits = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i)
    if (const std::uint32_t* found = index_.find(blocks[i] + 1)) {
      if (hits == i) ++hits;
      unlink(*found);
      push_newest(*found);
    }
  // Newest last: the prompt's first block ends up the most recently used.
  for (std::size_t i = blocks.size(); i-- > 0;) {
    if (const std::uint32_t* found = index_.find(blocks[i] + 1)) {
      unlink(*found);
      push_newest(*found);
      continue;
    }
    if (live_ >= capacity_) evict_oldest();
    std::uint32_t n;
    if (!free_.empty()) {
      n = free_.back();
      free_.pop_back();
    } else {
      n = static_cast<std::uint32_t>(nodes_.size());
      nodes_.emplace_back();
    }
    nodes_[n].key = blocks[i];
    index_.insert_or_assign(blocks[i] + 1, n);
    push_newest(n);
    ++live_;
  }
  return hits;
}

}  // namespace kvr::loadgen
