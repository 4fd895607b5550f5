#include "core/routing/kv_tiers.hpp"

#include <algorithm>
#include <cctype>

#include "core/kv/block_hash.hpp"
#include "core/kv/stored_block_hashes.hpp"
#include "core/routing/prefix_index.hpp"

namespace kvr {

namespace {

bool same_letters(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::toupper(static_cast<unsigned char>(x)) == std::toupper(static_cast<unsigned char>(y));
         });
}

std::int64_t ns_of(time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

kv_tier kv_tier_of(std::string_view medium) {
  if (medium.empty() || same_letters(medium, "GPU")) return kv_tier::gpu;
  for (std::string_view host : {"CPU", "CPU_PINNED", "HOST"})
    if (same_letters(medium, host)) return kv_tier::host;
  for (std::string_view disk : {"STORAGE", "DISK", "SSD"})
    if (same_letters(medium, disk)) return kv_tier::disk;
  for (std::string_view external : {"EXTERNAL", "REMOTE"})
    if (same_letters(medium, external)) return kv_tier::external;
  return kv_tier::unknown;
}

kv_tiers::kv_tiers(std::uint32_t block_size, std::uint64_t max_blocks, duration ttl)
    : block_size_(std::max<std::uint32_t>(block_size, 1)), max_blocks_(std::max<std::uint64_t>(max_blocks, 1)), ttl_(ttl) {}

bool kv_tiers::apply_stored(worker_id worker, const kv_stored& event, const prefix_index& gpu_chain, time_point now) {
  const kv_tier tier = kv_tier_of(event.medium);
  if (tier == kv_tier::unknown || tier == kv_tier::gpu) {
    ++counters_.unknown_tier_events;
    return false;
  }
  tier_store& store = stores_[slot_of(tier)];
  if (store.workers.size() <= worker) store.workers.resize(worker + 1);
  worker_blocks& mine = store.workers[worker];
  const std::size_t blocks = event.block_hashes.size();
  if (event.block_size != block_size_) return false;

  // The parent: on the GPU (a block offloaded after its parent stayed), else on any tier here.
  std::optional<std::uint64_t> parent;
  if (event.parent_block_hash) {
    parent = gpu_chain.sequence_hash_of(worker, *event.parent_block_hash);
    for (int t = 0; t < tiers && !parent; ++t)
      if (worker < stores_[t].workers.size())
        if (const sequence_blocks::block* b = stores_[t].workers[worker].blocks.find(*event.parent_block_hash))
          parent = b->sequence_hash;
    if (!parent) {
      ++counters_.unknown_parent;
      return false;
    }
  }
  std::span<const std::uint64_t> local = event.local_hashes;
  if (local.size() != blocks) {
    compute_stored_local_hashes(event, scratch_local_);
    local = scratch_local_;
    if (local.size() != blocks) return false;
  }
  scratch_sequence_.clear();
  if (parent) extend_sequence_hashes(*parent, local, scratch_sequence_);
  else compute_sequence_hashes(local, scratch_sequence_);
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::uint64_t engine_hash = event.block_hashes[b];
    unlink(store, mine, engine_hash);  // stored again: refreshed
    const std::uint32_t stamp = ++next_stamp_;
    mine.blocks.link(engine_hash, scratch_sequence_[b], stamp);
    store.order.push_back({ns_of(now), worker, engine_hash, stamp});
    ++store.pairs;
    ++stored_;
    ++counters_.stored_blocks;
  }
  // Within the bound, the oldest stored going first.
  while (store.pairs > max_blocks_ && !store.order.empty()) {
    const stored_entry oldest = store.order.front();
    store.order.pop_front();
    worker_blocks& theirs = store.workers[oldest.worker];
    const sequence_blocks::block* b = theirs.blocks.find(oldest.engine_hash);
    if (b == nullptr || b->tag != oldest.stamp) continue;  // removed or stored again since
    unlink(store, theirs, oldest.engine_hash);
    ++counters_.pushed_out;
  }
  return true;
}

bool kv_tiers::unlink(tier_store& store, worker_blocks& mine, std::uint64_t engine_hash) {
  if (!mine.blocks.unlink(engine_hash)) return false;
  --store.pairs;
  --stored_;
  return true;
}

void kv_tiers::apply_removed(worker_id worker, const kv_removed& event) {
  const kv_tier tier = kv_tier_of(event.medium);
  if (tier == kv_tier::unknown || tier == kv_tier::gpu) {
    ++counters_.unknown_tier_events;
    return;
  }
  tier_store& store = stores_[slot_of(tier)];
  if (store.workers.size() <= worker) store.workers.resize(worker + 1);
  worker_blocks& mine = store.workers[worker];
  mine.sent_removals = true;  // its blocks leave by removals, not by age
  for (const std::uint64_t engine_hash : event.block_hashes)
    if (unlink(store, mine, engine_hash)) ++counters_.removed_blocks;
}

void kv_tiers::clear(worker_id worker) {
  for (tier_store& store : stores_) {
    if (worker >= store.workers.size()) continue;
    sequence_blocks& blocks = store.workers[worker].blocks;
    store.pairs -= blocks.size();
    stored_ -= blocks.size();
    blocks = sequence_blocks{};  // whether its tier sends removals stays known
  }
}

void kv_tiers::expire(time_point now) {
  if (ttl_ <= duration::zero()) return;
  const std::int64_t before = ns_of(now - ttl_);
  for (tier_store& store : stores_) {
    // Entries are in the order stored: the old ones are at the front. A worker whose tier sends
    // removals keeps its blocks, which go back in line.
    while (!store.order.empty() && store.order.front().at_ns < before) {
      const stored_entry oldest = store.order.front();
      store.order.pop_front();
      worker_blocks& theirs = store.workers[oldest.worker];
      const sequence_blocks::block* b = theirs.blocks.find(oldest.engine_hash);
      if (b == nullptr || b->tag != oldest.stamp) continue;
      if (theirs.sent_removals) {  // still held: back in line for the bound, as if stored now
        store.order.push_back({ns_of(now), oldest.worker, oldest.engine_hash, oldest.stamp});
        continue;
      }
      unlink(store, theirs, oldest.engine_hash);
      ++counters_.aged_out;
    }
  }
}

double kv_tiers::best_weight(worker_id worker, std::uint64_t sequence_hash, const kv_tier_weights& weights) const {
  const double weight_of[tiers] = {weights.host, weights.disk, weights.external};
  double best = -1;
  for (int t = 0; t < tiers; ++t)
    if (worker < stores_[t].workers.size() && stores_[t].workers[worker].blocks.holds(sequence_hash))
      best = std::max(best, weight_of[t]);
  return best;
}

double kv_tiers::credit(worker_id worker, std::span<const std::uint64_t> sequence_hashes, std::uint32_t gpu_blocks,
                        const kv_tier_weights& weights) const {
  double total = 0;
  for (std::size_t i = gpu_blocks; i < sequence_hashes.size(); ++i) {
    const double weight = best_weight(worker, sequence_hashes[i], weights);
    if (weight < 0) break;
    total += weight;
  }
  return total;
}

std::uint32_t kv_tiers::lower_tier_run(worker_id worker, std::span<const std::uint64_t> sequence_hashes,
                                       std::uint32_t gpu_blocks) const {
  std::uint32_t run = 0;
  const kv_tier_weights any{};
  for (std::size_t i = gpu_blocks; i < sequence_hashes.size() && best_weight(worker, sequence_hashes[i], any) >= 0; ++i) ++run;
  return run;
}

std::uint64_t kv_tiers::blocks(kv_tier tier) const {
  if (tier == kv_tier::gpu || tier == kv_tier::unknown) return 0;
  return stores_[slot_of(tier)].pairs;
}

}  // namespace kvr
