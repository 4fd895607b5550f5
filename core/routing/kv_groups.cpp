#include "core/routing/kv_groups.hpp"

#include <algorithm>

#include "core/kv/block_hash.hpp"
#include "core/kv/stored_block_hashes.hpp"
#include "core/routing/prefix_index.hpp"

namespace kvr {

kv_groups::kv_groups(std::uint32_t block_size, std::uint64_t max_blocks)
    : block_size_(std::max<std::uint32_t>(block_size, 1)), max_blocks_(std::max<std::uint64_t>(max_blocks, 1)) {}

kv_groups::group* kv_groups::find_group(std::int64_t idx) {
  for (group& g : groups_)
    if (g.idx == idx) return &g;
  return nullptr;
}

const kv_groups::group* kv_groups::find_group(std::int64_t idx) const {
  return const_cast<kv_groups*>(this)->find_group(idx);
}

void kv_groups::note_group(std::int64_t group_idx, kv_group_kind kind) {
  for (const auto& [idx, known] : kinds_)
    if (idx == group_idx) return;
  if (kinds_.size() < max_groups) kinds_.emplace_back(group_idx, kind);
}

std::optional<kv_group_kind> kv_groups::kind_of_group(std::int64_t group_idx) const {
  for (const auto& [idx, kind] : kinds_)
    if (idx == group_idx) return kind;
  return std::nullopt;
}

kv_groups::group& kv_groups::group_of(const kv_stored& event, kv_group_kind kind) {
  const std::int64_t idx = event.group_idx.value_or(-1);
  group* g = find_group(idx);
  if (g == nullptr) {
    g = &groups_.emplace_back();
    g->idx = idx;
    g->kind = kind;
  }
  // What the events say of the group, as they say it: an engine restarted with another
  // configuration is another model, and its cards would say so.
  g->block_size = event.block_size;
  if (event.sliding_window && *event.sliding_window > 0)
    g->window_tokens = static_cast<std::uint32_t>(std::min<std::int64_t>(*event.sliding_window, UINT32_MAX));
  return *g;
}

group_store_outcome kv_groups::apply_stored(worker_id worker, const kv_stored& event, const prefix_index& chain) {
  const kv_group_kind kind = kv_group_kind_of(event.kv_cache_spec_kind);
  if (event.group_idx) note_group(*event.group_idx, kind);
  if (kind == kv_group_kind::unknown) {
    ++counters_.unknown_kind_events;
    return group_store_outcome::unknown_kind;
  }
  const std::size_t blocks = event.block_hashes.size();
  const std::uint32_t per_block = event.block_size / block_size_;  // the index's blocks in one of the group's
  const bool hashable = event.token_ids.size() == blocks * event.block_size || event.local_hashes.size() == blocks;
  if (event.block_size == 0 || event.block_size % block_size_ != 0 || (per_block > 1 && !event.images.empty()) || !hashable) {
    ++counters_.foreign_block_size;
    return group_store_outcome::foreign_block_size;
  }
  if (per_block > 1 && event.token_ids.size() != blocks * event.block_size) {
    ++counters_.foreign_block_size;  // hashed at the group's size, with the ids released: unusable here
    return group_store_outcome::foreign_block_size;
  }
  if (find_group(event.group_idx.value_or(-1)) == nullptr && groups_.size() >= max_groups) {
    ++counters_.unknown_kind_events;  // an engine naming more groups than any model has
    return group_store_outcome::unknown_kind;
  }
  group& g = group_of(event, kind);
  if (g.workers.size() <= worker) g.workers.resize(worker + 1);
  sequence_blocks& mine = g.workers[worker];

  std::optional<std::uint64_t> parent;
  if (event.parent_block_hash) {
    if (const sequence_blocks::block* own = mine.find(*event.parent_block_hash)) parent = own->sequence_hash;
    else parent = chain.sequence_hash_of(worker, *event.parent_block_hash);
    if (!parent) {
      ++counters_.unknown_parent;
      return group_store_outcome::unknown_parent;
    }
  }

  // The router's local hash of each of the index's blocks in the event: as the chain's, so a
  // group's block is keyed by the chain's sequence hash at its end.
  std::span<const std::uint64_t> local = event.local_hashes;
  if (per_block == 1 && local.size() != blocks) {
    compute_stored_local_hashes(event, scratch_local_);
    local = scratch_local_;
  } else if (per_block > 1) {
    scratch_local_.clear();
    const std::uint64_t seed = block_seed(event.lora_name);
    const std::uint64_t first_seed =
        !event.parent_block_hash && !event.cache_salt.empty() ? block_seed(event.lora_name, event.cache_salt) : seed;
    const std::span<const std::uint32_t> tokens(event.token_ids);
    for (std::size_t b = 0; b < blocks * per_block; ++b)
      scratch_local_.push_back(local_block_hash(tokens.subspan(b * block_size_, block_size_), {}, b == 0 ? first_seed : seed));
    local = scratch_local_;
  }

  scratch_sequence_.clear();
  if (parent) extend_sequence_hashes(*parent, local, scratch_sequence_);
  else compute_sequence_hashes(local, scratch_sequence_);
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::uint64_t sequence = scratch_sequence_[(b + 1) * per_block - 1];  // the chain at the block's end
    const std::uint64_t engine_hash = event.block_hashes[b];
    if (const sequence_blocks::block* known = mine.find(engine_hash)) {
      if (known->sequence_hash == sequence) continue;  // stored again
      unlink(g, mine, engine_hash);                    // an engine hash re-used for other content
    }
    if (g.pairs >= max_blocks_) {
      ++counters_.over_bound;
      return group_store_outcome::over_bound;
    }
    mine.link(engine_hash, sequence);
    ++g.pairs;
    ++counters_.stored_blocks;
  }
  return group_store_outcome::applied;
}

void kv_groups::unlink(group& g, sequence_blocks& blocks, std::uint64_t engine_hash) {
  if (!blocks.unlink(engine_hash)) return;
  --g.pairs;
  ++counters_.removed_blocks;
}

bool kv_groups::owns_removal(const kv_removed& event) const {
  if (!event.group_idx) return false;
  // A group never seen stored has put nothing into the chain (every store names its group),
  // so its removals cannot be the chain's: they are dropped with the group's.
  const std::optional<kv_group_kind> kind = kind_of_group(*event.group_idx);
  return !kind || *kind != kv_group_kind::full_attention;
}

void kv_groups::apply_removed(worker_id worker, const kv_removed& event) {
  if (!event.group_idx) return;
  group* g = find_group(*event.group_idx);
  if (g == nullptr || worker >= g->workers.size()) return;  // a kind not indexed, or nothing stored
  for (const std::uint64_t engine_hash : event.block_hashes) unlink(*g, g->workers[worker], engine_hash);
}

void kv_groups::clear(worker_id worker) {
  for (group& g : groups_) {
    if (worker >= g.workers.size()) continue;
    g.pairs -= g.workers[worker].size();
    g.workers[worker] = sequence_blocks{};
  }
}

bool kv_groups::group_holds(const group& g, worker_id worker, std::uint64_t sequence_hash) const {
  return worker < g.workers.size() && g.workers[worker].holds(sequence_hash);
}

std::uint32_t kv_groups::group_limit(const group& g, worker_id worker, std::span<const std::uint64_t> sequence_hashes,
                                     std::uint32_t length) const {
  const std::uint32_t per_block = std::max<std::uint32_t>(g.block_size / block_size_, 1);
  const std::uint32_t group_blocks = length / per_block;
  // Whether the group holds its block `i`, which ends at the index's block (i + 1) * per_block - 1.
  auto holds = [&](std::uint32_t i) {
    return group_holds(g, worker, sequence_hashes[static_cast<std::size_t>(i + 1) * per_block - 1]);
  };
  if (g.kind == kv_group_kind::mamba) {
    for (std::uint32_t i = group_blocks; i-- > 0;)
      if (holds(i)) return (i + 1) * per_block;
    return 0;
  }
  // A sliding window: the window's blocks before the end, as vLLM's SlidingWindowManager asks.
  const std::uint32_t group_block_tokens = per_block * block_size_;
  const std::uint32_t needed = g.window_tokens > 1 ? (g.window_tokens - 1 + group_block_tokens - 1) / group_block_tokens : 1;
  std::uint32_t run = 0;
  for (std::uint32_t i = group_blocks; i-- > 0;) {
    if (!holds(i)) {
      run = 0;
      continue;
    }
    if (++run >= needed) return (i + run) * per_block;
  }
  return run * per_block;  // no run as long as the window: the leading run still serves
}

std::uint32_t kv_groups::usable_blocks(worker_id worker, std::span<const std::uint64_t> sequence_hashes,
                                       std::uint32_t chain_blocks) const {
  std::uint32_t length = std::min<std::uint32_t>(chain_blocks, static_cast<std::uint32_t>(sequence_hashes.size()));
  // Each group may only shorten the prefix, and a shorter prefix may need other blocks of a
  // window, so the groups are asked again until none shortens it (vLLM's coordinator does so).
  for (bool shortened = true; shortened && length > 0;) {
    shortened = false;
    for (const group& g : groups_) {
      const std::uint32_t limit = group_limit(g, worker, sequence_hashes, length);
      if (limit < length) {
        length = limit;
        shortened = true;
      }
    }
  }
  return length;
}

void kv_groups::limit_overlaps(std::span<const std::uint64_t> sequence_hashes, std::span<std::uint32_t> overlap_blocks) const {
  if (groups_.empty()) return;
  for (worker_id w = 0; w < overlap_blocks.size(); ++w)
    if (overlap_blocks[w] > 0) overlap_blocks[w] = usable_blocks(w, sequence_hashes, overlap_blocks[w]);
}

std::vector<kv_group_info> kv_groups::groups() const {
  std::vector<kv_group_info> out;
  for (const group& g : groups_) out.push_back({g.idx, g.kind, g.window_tokens, g.block_size, g.pairs});
  return out;
}

std::size_t kv_groups::memory_bytes() const {
  std::size_t bytes = groups_.capacity() * sizeof(group) + kinds_.capacity() * sizeof(kinds_[0]);
  for (const group& g : groups_) {
    bytes += g.workers.capacity() * sizeof(sequence_blocks);
    for (const sequence_blocks& w : g.workers) bytes += w.memory_bytes();
  }
  return bytes;
}

}  // namespace kvr
