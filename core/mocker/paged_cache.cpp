#include "core/mocker/paged_cache.hpp"

#include <algorithm>
#include <cstdio>

#include <xxhash.h>

#include "core/kv/block_hash.hpp"

namespace kvr::mocker {

namespace {
/// The hash chain's start, so that the first block's hash differs from a block hashed with
/// parent 0 by chance.
constexpr std::uint64_t root_seed = 0x6b76726f75746572;  // "kvrouter"
}  // namespace

paged_cache::paged_cache(std::uint32_t num_blocks, std::uint32_t block_size, hybrid_groups hybrid, offload_tier offload)
    : num_blocks_(num_blocks), block_size_(block_size), hybrid_(hybrid), offload_(offload) {
  if (hybrid_.mamba && hybrid_.mamba_states == 0) hybrid_.mamba_states = std::max<std::uint32_t>(num_blocks / 4, 1);
}

namespace {
constexpr std::int64_t window_group = 1;
constexpr std::int64_t mamba_group = 2;
}  // namespace

std::uint32_t paged_cache::window_blocks_needed() const {
  return std::max<std::uint32_t>((hybrid_.sliding_window_tokens - 1 + block_size_ - 1) / block_size_, 1);
}

std::uint32_t paged_cache::window_hit(std::span<const std::uint64_t> hashes, std::uint32_t length) const {
  const std::uint32_t needed = window_blocks_needed();
  std::uint32_t run = 0;
  for (std::uint32_t i = length; i-- > 0;) {
    if (!window_blocks_.contains(hashes[i])) {
      run = 0;
    } else if (++run >= needed) {
      return i + run;
    }
  }
  return run;
}

std::uint32_t paged_cache::mamba_hit(std::span<const std::uint64_t> hashes, std::uint32_t length) const {
  for (std::uint32_t i = length; i-- > 0;)
    if (mamba_states_.contains(hashes[i])) return i + 1;
  return 0;
}

std::uint32_t paged_cache::hybrid_hit(std::span<const std::uint64_t> hashes, std::uint32_t full_hit) const {
  std::uint32_t length = full_hit;
  for (std::uint32_t before = length + 1; before != length;) {
    before = length;
    if (hybrid_.sliding_window_tokens > 0) length = std::min(length, window_hit(hashes, length));
    if (hybrid_.mamba) length = std::min(length, mamba_hit(hashes, length));
  }
  return length;
}

void paged_cache::store_in_groups(std::span<const std::uint32_t> tokens, std::span<const std::uint64_t> hashes,
                                  std::uint32_t first, std::uint32_t full, std::vector<kv_event>& events) {
  auto stored_in = [&](std::int64_t group, const char* kind, std::uint32_t from, std::uint32_t to) {
    kv_stored stored;
    if (from > 0) stored.parent_block_hash = hashes[from - 1];
    stored.block_size = block_size_;
    stored.medium = "GPU";
    stored.group_idx = group;
    stored.kv_cache_spec_kind = kind;
    if (group == window_group) stored.sliding_window = hybrid_.sliding_window_tokens;
    stored.block_hashes.assign(hashes.begin() + from, hashes.begin() + to);
    stored.token_ids.assign(tokens.begin() + static_cast<std::ptrdiff_t>(from) * block_size_,
                            tokens.begin() + static_cast<std::ptrdiff_t>(to) * block_size_);
    events.emplace_back(std::move(stored));
  };
  if (hybrid_.sliding_window_tokens > 0) {
    if (full > first) {
      for (std::uint32_t i = first; i < full; ++i) window_blocks_.insert(hashes[i]);
      stored_in(window_group, "sliding_window", first, full);
    }
    // What falls out of the window at the prompt's end is freed at once: the harshest a window
    // group can be (vLLM frees it as the window moves, and evicts it when memory is short).
    for (std::uint32_t i = 0; i + window_blocks_needed() < full; ++i)
      if (window_blocks_.erase(hashes[i]) > 0) events.emplace_back(kv_removed{{hashes[i]}, "GPU", window_group});
  }
  if (hybrid_.mamba && full > 0 && !mamba_states_.contains(hashes[full - 1])) {
    mamba_states_.emplace(hashes[full - 1], mamba_order_.insert(mamba_order_.end(), hashes[full - 1]));
    stored_in(mamba_group, "mamba", full - 1, full);
    while (mamba_states_.size() > hybrid_.mamba_states) {
      const std::uint64_t oldest = mamba_order_.front();
      mamba_order_.pop_front();
      mamba_states_.erase(oldest);
      events.emplace_back(kv_removed{{oldest}, "GPU", mamba_group});
    }
  }
}

void paged_cache::forget_in_groups(std::uint64_t hash, std::vector<kv_event>& events) {
  if (window_blocks_.erase(hash) > 0) events.emplace_back(kv_removed{{hash}, "GPU", window_group});
  if (const auto state = mamba_states_.find(hash); state != mamba_states_.end()) {
    mamba_order_.erase(state->second);
    mamba_states_.erase(state);
    events.emplace_back(kv_removed{{hash}, "GPU", mamba_group});
  }
}

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

void paged_cache::offload(std::uint64_t hash, block& evicted, std::vector<kv_event>& events) {
  if (host_blocks_.contains(hash)) return;  // the host keeps its copy from an earlier eviction
  kv_stored stored;
  stored.block_hashes = {hash};
  stored.parent_block_hash = evicted.parent;
  stored.token_ids = std::move(evicted.tokens);
  stored.block_size = block_size_;
  stored.medium = "CPU";
  events.emplace_back(std::move(stored));
  host_blocks_.emplace(hash, host_order_.insert(host_order_.end(), hash));
  while (host_blocks_.size() > offload_.cpu_blocks) {
    const std::uint64_t oldest = host_order_.front();
    host_order_.pop_front();
    host_blocks_.erase(oldest);
    events.emplace_back(kv_removed{{oldest}, "CPU", 0});
  }
}

void paged_cache::evict_one(std::vector<kv_event>& events) {
  const std::uint64_t victim = evictable_.front();
  evictable_.pop_front();
  if (offload_.cpu_blocks > 0) offload(victim, blocks_.at(victim), events);
  blocks_.erase(victim);
  events.emplace_back(kv_removed{{victim}, "GPU", 0});  // vLLM sends one event per evicted block
  if (hybrid_.any()) forget_in_groups(victim, events);  // the groups share the pool here
}

std::optional<block_allocation> paged_cache::allocate(std::span<const std::uint32_t> tokens,
                                                      std::uint32_t max_new_tokens, std::vector<kv_event>& events,
                                                      std::span<const image_span> images) {
  const std::vector<std::uint64_t> hashes = engine_hashes(tokens, images);
  const std::uint32_t reused = hybrid_.any() ? hybrid_hit(hashes, cached_prefix(hashes)) : cached_prefix(hashes);
  std::uint32_t loaded = 0;  // the next blocks, on the host tier: loaded, not computed
  while (offload_.cpu_blocks > 0 && reused + loaded < hashes.size() && host_blocks_.contains(hashes[reused + loaded])) ++loaded;
  const std::uint32_t total = blocks_needed(tokens.size(), max_new_tokens);
  const auto full = static_cast<std::uint32_t>(hashes.size());
  const std::uint32_t fresh = total - reused;  // new cached blocks + private blocks
  // The reused blocks that are evictable now stop being candidates once pinned.
  std::uint32_t reused_evictable = 0;
  for (std::uint32_t i = 0; i < reused; ++i) reused_evictable += blocks_.at(hashes[i]).references == 0 ? 1 : 0;
  if (fresh > free_blocks() + static_cast<std::uint32_t>(evictable_.size()) - reused_evictable) return std::nullopt;

  block_allocation allocation;
  allocation.reused_blocks = reused;
  allocation.loaded_blocks = loaded;
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
    if (hybrid_.any()) {
      stored.group_idx = 0;
      stored.kv_cache_spec_kind = "full_attention";
    }
    for (std::uint32_t i = reused; i < full; ++i) {
      stored.block_hashes.push_back(hashes[i]);
      if (blocks_.contains(hashes[i])) {
        pin(hashes[i]);  // its parent was evicted before it: cached again, stored again
      } else {
        block& added = blocks_.emplace(hashes[i], block{router_sequence[i], 1, {}}).first->second;
        if (offload_.cpu_blocks > 0) {  // what its offloaded copy will name and carry
          if (i > 0) added.parent = hashes[i - 1];
          added.tokens.assign(tokens.begin() + static_cast<std::ptrdiff_t>(i) * block_size_,
                              tokens.begin() + static_cast<std::ptrdiff_t>(i + 1) * block_size_);
        }
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
  if (hybrid_.any()) store_in_groups(tokens, hashes, reused, full, events);
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
  host_blocks_.clear();
  host_order_.clear();
  window_blocks_.clear();
  mamba_states_.clear();
  mamba_order_.clear();
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
