#include "core/mocker/paged_cache.hpp"

#include <cstdio>

#include <xxhash.h>

#include "core/kv/block_hash.hpp"

namespace kvr::mocker {

namespace {
/// The hash chain's start, so that the first block's hash differs from a block hashed with
/// parent 0 by chance.
constexpr std::uint64_t root_seed = 0x6b76726f75746572;  // "kvrouter"
}  // namespace

paged_cache::paged_cache(std::uint32_t num_blocks, std::uint32_t block_size)
    : num_blocks_(num_blocks), block_size_(block_size) {}

namespace {
bool covers(const image_span& image, std::size_t block_start, std::size_t block_size) {
  return image.token_offset < block_start + block_size && image.token_offset + image.token_count > block_start;
}
}  // namespace

std::vector<std::uint64_t> paged_cache::engine_hashes(std::span<const std::uint32_t> tokens,
                                                      std::span<const image_span> images) const {
  std::vector<std::uint64_t> hashes;
  std::uint64_t parent = root_seed;
  for (std::size_t start = 0; start + block_size_ <= tokens.size(); start += block_size_) {
    std::uint64_t seed = parent;
    for (const image_span& image : images)
      if (covers(image, start, block_size_)) seed = XXH64(&image.hash, sizeof(image.hash), seed);
    parent = XXH64(tokens.data() + start, block_size_ * sizeof(std::uint32_t), seed);
    hashes.push_back(parent);
  }
  return hashes;
}

std::uint32_t paged_cache::cached_prefix(std::span<const std::uint64_t> hashes) const {
  std::uint32_t n = 0;
  while (n < hashes.size() && blocks_.contains(hashes[n])) ++n;
  return n;
}

std::uint32_t paged_cache::blocks_needed(std::size_t prompt_tokens, std::uint32_t max_new_tokens) const {
  return static_cast<std::uint32_t>((prompt_tokens + max_new_tokens + block_size_ - 1) / block_size_);
}

std::uint32_t paged_cache::free_blocks() const {
  return num_blocks_ - pinned_ - private_ - static_cast<std::uint32_t>(evictable_.size());
}

void paged_cache::pin(std::uint64_t hash) {
  block& b = blocks_.at(hash);
  if (b.references++ == 0) {
    evictable_.erase(b.lru);
    ++pinned_;
  }
}

void paged_cache::evict_one(std::vector<kv_event>& events) {
  const std::uint64_t victim = evictable_.front();
  evictable_.pop_front();
  blocks_.erase(victim);
  events.emplace_back(kv_removed{{victim}, "GPU", 0});  // vLLM sends one event per evicted block
}

std::optional<block_allocation> paged_cache::allocate(std::span<const std::uint32_t> tokens,
                                                      std::uint32_t max_new_tokens, std::vector<kv_event>& events,
                                                      std::span<const image_span> images) {
  const std::vector<std::uint64_t> hashes = engine_hashes(tokens, images);
  const std::uint32_t reused = cached_prefix(hashes);
  const std::uint32_t total = blocks_needed(tokens.size(), max_new_tokens);
  const auto full = static_cast<std::uint32_t>(hashes.size());
  const std::uint32_t fresh = total - reused;  // new cached blocks + private blocks
  // The reused blocks that are evictable now stop being candidates once pinned.
  std::uint32_t reused_evictable = 0;
  for (std::uint32_t i = 0; i < reused; ++i) reused_evictable += blocks_.at(hashes[i]).references == 0 ? 1 : 0;
  if (fresh > free_blocks() + static_cast<std::uint32_t>(evictable_.size()) - reused_evictable) return std::nullopt;

  block_allocation allocation;
  allocation.reused_blocks = reused;
  for (std::uint32_t i = 0; i < reused; ++i) {
    pin(hashes[i]);
    allocation.cached_blocks.push_back(hashes[i]);
  }
  while (free_blocks() < fresh) evict_one(events);

  if (full > reused) {
    std::vector<std::uint64_t> router_local, router_sequence;
    compute_local_hashes(tokens.subspan(0, static_cast<std::size_t>(full) * block_size_), block_size_, images, {}, router_local);
    compute_sequence_hashes(router_local, router_sequence);
    kv_stored stored;
    if (reused > 0) stored.parent_block_hash = hashes[reused - 1];
    stored.block_size = block_size_;
    stored.medium = "GPU";
    for (std::uint32_t i = reused; i < full; ++i) {
      stored.block_hashes.push_back(hashes[i]);
      if (blocks_.contains(hashes[i])) {
        pin(hashes[i]);  // its parent was evicted before it: cached again, stored again
      } else {
        blocks_.emplace(hashes[i], block{router_sequence[i], 1, {}});
        ++pinned_;
      }
      allocation.cached_blocks.push_back(hashes[i]);
    }
    stored.token_ids.assign(tokens.begin() + static_cast<std::ptrdiff_t>(reused) * block_size_,
                            tokens.begin() + static_cast<std::ptrdiff_t>(full) * block_size_);
    for (std::uint32_t i = reused; i < full; ++i) {
      const std::size_t start = static_cast<std::size_t>(i) * block_size_;
      for (const image_span& image : images) {
        if (!covers(image, start, block_size_)) continue;
        char digest[17];
        std::snprintf(digest, sizeof(digest), "%016llx", static_cast<unsigned long long>(image.hash));
        stored.images.push_back({.block = i - reused,
                                 .hash = image.hash,
                                 .offset = static_cast<std::int64_t>(image.token_offset) - static_cast<std::int64_t>(start),
                                 .identifier = std::string(digest) + std::string(48, '0')});
      }
    }
    events.emplace_back(std::move(stored));
  }
  allocation.private_blocks = total - full;
  private_ += allocation.private_blocks;
  return allocation;
}

void paged_cache::release(const block_allocation& allocation) {
  private_ -= allocation.private_blocks;
  // Last block first into the queue: a finished sequence's suffix is evicted before its prefix.
  for (auto it = allocation.cached_blocks.rbegin(); it != allocation.cached_blocks.rend(); ++it) {
    const auto found = blocks_.find(*it);
    if (found == blocks_.end()) continue;  // gone in a reset
    block& b = found->second;
    if (--b.references == 0) {
      --pinned_;
      b.lru = evictable_.insert(evictable_.end(), *it);
    }
  }
}

void paged_cache::reset() {
  blocks_.clear();
  evictable_.clear();
  pinned_ = 0;
  private_ = 0;
}

double paged_cache::usage() const {
  return num_blocks_ == 0 ? 0.0 : static_cast<double>(pinned_ + private_) / num_blocks_;
}

std::vector<cached_block> paged_cache::dump() const {
  std::vector<cached_block> out;
  out.reserve(blocks_.size());
  for (const auto& [hash, b] : blocks_) out.push_back({hash, b.router_sequence_hash, b.references});
  return out;
}

}  // namespace kvr::mocker
