#include "core/routing/prefix_index.hpp"

#include <algorithm>
#include <bit>
#include <cassert>
#include <functional>
#include <utility>

#include "core/kv/block_hash.hpp"
#include "core/kv/stored_block_hashes.hpp"

namespace kvr {
namespace {

constexpr std::size_t bits_per_word = 64;

std::int64_t to_ns(time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

prefix_index::prefix_index(std::uint32_t block_size, std::uint64_t max_blocks, duration approx_ttl)
    : block_size_(block_size), max_blocks_(std::max<std::uint64_t>(max_blocks, 1)), approx_ttl_(approx_ttl) {
  assert(block_size_ > 0);
}

bool prefix_index::apply(worker_id worker, const kv_event& event) {
  if (const auto* stored = std::get_if<kv_stored>(&event)) return apply_stored(worker, *stored);
  if (const auto* removed = std::get_if<kv_removed>(&event)) {
    apply_removed(worker, *removed);
    return true;
  }
  apply_cleared(worker);
  return true;
}

prefix_index::worker_state& prefix_index::worker_slot(worker_id worker) {
  assert(worker < max_workers);
  if (worker >= workers_.size()) {
    workers_.resize(worker + 1);
    const std::size_t words = (workers_.size() + bits_per_word - 1) / bits_per_word;
    if (words > words_) grow_bitsets(words);
  }
  return workers_[worker];
}

void prefix_index::grow_bitsets(std::size_t words) {
  const std::size_t old_extra = words_ - 1, new_extra = words - 1;
  std::vector<std::uint64_t> grown(entries_.size() * new_extra, 0);
  for (std::size_t e = 0; e < entries_.size(); ++e)
    std::copy_n(extra_holders_.begin() + static_cast<std::ptrdiff_t>(e * old_extra), old_extra,
                grown.begin() + static_cast<std::ptrdiff_t>(e * new_extra));
  extra_holders_.swap(grown);
  words_ = words;
}

std::uint64_t& prefix_index::holder_word(std::uint32_t entry_index, std::size_t word) {
  return word == 0 ? entries_[entry_index].holders : extra_holders_[entry_index * (words_ - 1) + (word - 1)];
}

std::uint64_t prefix_index::holder_word(std::uint32_t entry_index, std::size_t word) const {
  return const_cast<prefix_index*>(this)->holder_word(entry_index, word);
}

bool prefix_index::has_bit(std::uint32_t entry_index, worker_id worker) const {
  return (holder_word(entry_index, worker / bits_per_word) >> (worker % bits_per_word)) & 1u;
}

bool prefix_index::is_live(worker_id worker, const worker_block& ref) const {
  if (ref.entry >= entries_.size()) return false;
  const entry& e = entries_[ref.entry];
  return e.in_use() && e.generation == ref.generation && has_bit(ref.entry, worker);
}

bool prefix_index::apply_stored(worker_id worker, const kv_stored& event) {
  const std::size_t n_blocks = event.block_hashes.size();
  if (event.block_size != block_size_ || !fills_its_blocks(event)) {
    ++counters_.malformed_stored;
    return false;
  }
  worker_state& state = worker_slot(worker);

  std::uint64_t parent_sequence_hash = 0;
  if (event.parent_block_hash) {
    const worker_block* parent = state.blocks.find(*event.parent_block_hash);
    if (parent == nullptr || !is_live(worker, *parent)) {
      ++counters_.unknown_parent;
      return false;
    }
    parent_sequence_hash = entries_[parent->entry].sequence_hash;
  }

  // Phase 1, pure compute: the router's own keys from the event's tokens (and image hashes,
  // LoRA, salt), which a KV decoder thread usually computed already, chained onto the parent;
  // prefetching the table slots phase 2 will touch so their misses overlap.
  std::span<const std::uint64_t> local = event.local_hashes;
  if (local.size() != n_blocks) {
    compute_stored_local_hashes(event, scratch_local_);
    local = scratch_local_;
  }
  scratch_sequence_.clear();
  std::uint64_t previous = parent_sequence_hash;
  for (std::size_t b = 0; b < n_blocks; ++b) {
    previous = !event.parent_block_hash && b == 0 ? local[0] : chain_sequence_hash(previous, local[b]);
    scratch_sequence_.push_back(previous);
    by_sequence_hash_.prefetch(previous);
    state.blocks.prefetch(event.block_hashes[b]);
  }

  // Phase 2: link every block to its entry, probing each table once per block. Nothing below
  // changes a worker's map but the `try_emplace` itself (sweeps wait for the end), so `ref`
  // stays valid across the unlinking and eviction that adding may do.
  for (std::size_t b = 0; b < n_blocks; ++b) {
    const std::uint64_t sequence_hash = scratch_sequence_[b];
    auto [ref, new_key] = state.blocks.try_emplace(event.block_hashes[b]);
    if (!new_key && is_live(worker, *ref)) {
      if (entries_[ref->entry].sequence_hash == sequence_hash) {  // stored again: already linked
        entries_[ref->entry].referenced = true;
        clear_ttl(state, event.block_hashes[b]);
        continue;
      }
      remove_pair(worker, ref->entry);  // an engine hash re-used for other content
    }
    *ref = add_pair(worker, sequence_hash);
    clear_ttl(state, event.block_hashes[b]);
  }
  sweep_due_workers();
  return true;
}

void prefix_index::prefetch(worker_id worker, std::span<const kv_event> events) const {
  if (events.size() < 2 || worker >= workers_.size()) return;  // one event prefetches for itself
  const worker_state& state = workers_[worker];
  // Three passes, each issuing its loads before the next one waits on them: references, then
  // the parents' entries, then the slots that need a parent's sequence hash to be placed.
  for (const kv_event& event : events) {
    const auto* stored = std::get_if<kv_stored>(&event);
    if (stored == nullptr) continue;
    if (stored->parent_block_hash) state.blocks.prefetch(*stored->parent_block_hash);
    for (std::uint64_t hash : stored->block_hashes) state.blocks.prefetch(hash);
    if (!stored->parent_block_hash && !stored->local_hashes.empty()) by_sequence_hash_.prefetch(stored->local_hashes[0]);
  }
  for (const kv_event& event : events) {
    const auto* stored = std::get_if<kv_stored>(&event);
    if (stored == nullptr || !stored->parent_block_hash) continue;
    const worker_block* parent = state.blocks.find(*stored->parent_block_hash);
    if (parent != nullptr && parent->entry < entries_.size()) __builtin_prefetch(&entries_[parent->entry]);
  }
  for (const kv_event& event : events) {
    const auto* stored = std::get_if<kv_stored>(&event);
    if (stored == nullptr || !stored->parent_block_hash || stored->local_hashes.empty()) continue;
    const worker_block* parent = state.blocks.find(*stored->parent_block_hash);
    if (parent != nullptr && parent->entry < entries_.size())
      by_sequence_hash_.prefetch(chain_sequence_hash(entries_[parent->entry].sequence_hash, stored->local_hashes[0]));
  }
}

prefix_index::worker_block prefix_index::add_pair(worker_id worker, std::uint64_t sequence_hash) {
  auto [slot, new_key] = by_sequence_hash_.try_emplace(sequence_hash, no_entry);
  if (!new_key && has_bit(*slot, worker)) {
    entry& e = entries_[*slot];
    e.referenced = true;
    return {*slot, e.generation};
  }
  if (total_blocks_ >= max_blocks_) {
    while (total_blocks_ >= max_blocks_) evict_one();
    // The evictions moved slots, and may have dropped this hash's entry: look again.
    slot = by_sequence_hash_.try_emplace(sequence_hash, no_entry).first;
  }
  if (*slot == no_entry) *slot = new_entry(sequence_hash);
  const std::uint32_t index = *slot;
  entry& e = entries_[index];
  holder_word(index, worker / bits_per_word) |= std::uint64_t{1} << (worker % bits_per_word);
  ++e.worker_count;
  e.referenced = true;
  ++workers_[worker].live_blocks;
  ++total_blocks_;
  return {index, e.generation};
}

void prefix_index::clear_ttl(worker_state& state, std::uint64_t key) {
  if (!state.predicted_until.empty()) state.predicted_until.erase(key);
}

std::uint32_t prefix_index::new_entry(std::uint64_t sequence_hash) {
  std::uint32_t index;
  if (!free_entries_.empty()) {
    index = free_entries_.back();
    free_entries_.pop_back();
  } else {
    index = static_cast<std::uint32_t>(entries_.size());
    entries_.emplace_back();
    extra_holders_.resize(extra_holders_.size() + (words_ - 1), 0);
  }
  entries_[index].sequence_hash = sequence_hash;
  return index;
}

void prefix_index::remove_pair(worker_id worker, std::uint32_t entry_index) {
  entry& e = entries_[entry_index];
  holder_word(entry_index, worker / bits_per_word) &= ~(std::uint64_t{1} << (worker % bits_per_word));
  --workers_[worker].live_blocks;
  --total_blocks_;
  if (--e.worker_count == 0) drop_entry(entry_index);
}

void prefix_index::drop_entry(std::uint32_t entry_index) {
  entry& e = entries_[entry_index];
  by_sequence_hash_.erase(e.sequence_hash);
  e.referenced = false;
  e.worker_count = 0;
  ++e.generation;  // every worker's reference to it is stale from here on
  free_entries_.push_back(entry_index);

  for (std::size_t w = 0; w < words_; ++w) {
    const std::uint64_t holders = std::exchange(holder_word(entry_index, w), 0);
    for (std::uint64_t word = holders; word != 0; word &= word - 1) {
      const auto worker = static_cast<worker_id>(w * bits_per_word + static_cast<std::size_t>(std::countr_zero(word)));
      worker_state& holder = workers_[worker];
      --holder.live_blocks;
      --total_blocks_;
      if (!holder.sweep_due && holder.blocks.size() > 2 * holder.live_blocks + 1024) {
        holder.sweep_due = true;
        sweep_due_.push_back(worker);
      }
    }
  }
}

void prefix_index::evict_one() {
  assert(total_blocks_ > 0);
  for (;;) {
    if (clock_hand_ >= entries_.size()) clock_hand_ = 0;
    entry& e = entries_[clock_hand_];
    const auto index = static_cast<std::uint32_t>(clock_hand_++);
    if (!e.in_use()) continue;
    if (e.referenced) {
      e.referenced = false;
      continue;
    }
    ++counters_.evicted_entries;
    drop_entry(index);
    return;
  }
}

void prefix_index::sweep_due_workers() {
  // Dropped entries leave stale references behind (found lazily by generation); a worker's map
  // is swept once they outnumber its live ones, so that it stays proportional to its blocks.
  // Sweeps wait for the end of an operation: until then, references into maps stay valid.
  for (const worker_id worker : sweep_due_) {
    worker_state& state = workers_[worker];
    state.sweep_due = false;
    if (state.blocks.size() <= 2 * state.live_blocks + 1024) continue;
    state.blocks.erase_if([&](std::uint64_t, const worker_block& ref) { return !is_live(worker, ref); });
    if (!state.predicted_until.empty())
      state.predicted_until.erase_if([&](std::uint64_t key, std::int64_t) { return state.blocks.find(key) == nullptr; });
  }
  sweep_due_.clear();
}

void prefix_index::apply_removed(worker_id worker, const kv_removed& event) {
  worker_state& state = worker_slot(worker);
  // Passes so that each pass's cache misses overlap: the worker's references, the entries they
  // name, the entries' slots in the sequence-hash map, then the removals.
  for (std::uint64_t hash : event.block_hashes) state.blocks.prefetch(hash);
  scratch_entries_.clear();
  for (std::uint64_t hash : event.block_hashes) {
    const worker_block* ref = state.blocks.find(hash);
    const std::uint32_t entry_index = ref != nullptr ? ref->entry : UINT32_MAX;
    scratch_entries_.push_back(entry_index);
    if (entry_index < entries_.size()) __builtin_prefetch(&entries_[entry_index]);
  }
  for (std::uint32_t entry_index : scratch_entries_)
    if (entry_index < entries_.size()) by_sequence_hash_.prefetch(entries_[entry_index].sequence_hash);
  for (std::uint64_t hash : event.block_hashes) {
    const std::optional<worker_block> ref = state.blocks.extract(hash);  // stale or live, it goes
    clear_ttl(state, hash);
    if (!ref || !is_live(worker, *ref)) {
      ++counters_.unknown_removed;
      continue;
    }
    remove_pair(worker, ref->entry);
    ++counters_.removed_blocks;
  }
  sweep_due_workers();
}

void prefix_index::apply_cleared(worker_id worker) {
  worker_state& state = worker_slot(worker);
  ++counters_.cleared;
  flat_u64_map<worker_block> blocks;
  blocks.swap(state.blocks);
  state.predicted_until.clear();
  blocks.for_each([&](std::uint64_t, const worker_block& ref) {
    if (is_live(worker, ref)) remove_pair(worker, ref.entry);
  });
  sweep_due_workers();
}

void prefix_index::remove_worker(worker_id worker) {
  if (worker >= workers_.size()) return;
  apply_cleared(worker);
  workers_[worker] = worker_state{};
}

void prefix_index::insert_predicted(worker_id worker, std::span<const std::uint64_t> sequence_hashes, time_point now) {
  worker_state& state = worker_slot(worker);
  const std::int64_t expires = to_ns(now + approx_ttl_);
  for (std::uint64_t sequence_hash : sequence_hashes) {
    auto [ref, new_key] = state.blocks.try_emplace(sequence_hash);
    if (!new_key && is_live(worker, *ref)) {
      entries_[ref->entry].referenced = true;
      // Refreshed: the heap entry is re-armed when it comes due. A pair a KV event stored
      // stays without TTL.
      if (std::int64_t* until = state.predicted_until.find(sequence_hash)) *until = expires;
      continue;
    }
    *ref = add_pair(worker, sequence_hash);
    state.predicted_until.insert_or_assign(sequence_hash, expires);
    expiry_heap_.push_back({expires, worker, sequence_hash});
    std::push_heap(expiry_heap_.begin(), expiry_heap_.end(), std::greater<>{});
    ++counters_.predicted_blocks;
  }
  sweep_due_workers();
  if (expiry_heap_.size() > 2 * max_blocks_ + 1024) compact_expiry_heap();
}

void prefix_index::expire(time_point now) {
  const std::int64_t now_ns = to_ns(now);
  while (!expiry_heap_.empty() && expiry_heap_.front().at_ns <= now_ns) {
    std::pop_heap(expiry_heap_.begin(), expiry_heap_.end(), std::greater<>{});
    const expiry due = expiry_heap_.back();
    expiry_heap_.pop_back();
    if (due.worker >= workers_.size()) continue;
    worker_state& state = workers_[due.worker];
    const std::int64_t* until = state.predicted_until.find(due.key);
    if (until == nullptr) continue;  // gone, or now owned by a KV event
    if (*until > now_ns) {  // refreshed since this heap entry was armed
      expiry_heap_.push_back({*until, due.worker, due.key});
      std::push_heap(expiry_heap_.begin(), expiry_heap_.end(), std::greater<>{});
      continue;
    }
    state.predicted_until.erase(due.key);
    const std::optional<worker_block> ref = state.blocks.extract(due.key);
    if (!ref || !is_live(due.worker, *ref)) continue;
    remove_pair(due.worker, ref->entry);
    ++counters_.expired_blocks;
  }
  sweep_due_workers();
}

void prefix_index::compact_expiry_heap() {
  // Heap entries of pairs evicted or removed meanwhile are dead weight; rebuild from the live
  // predicted pairs so the heap stays proportional to the bound.
  expiry_heap_.clear();
  for (worker_id w = 0; w < workers_.size(); ++w)
    workers_[w].predicted_until.for_each([&](std::uint64_t key, std::int64_t until) {
      const worker_block* ref = workers_[w].blocks.find(key);
      if (ref != nullptr && is_live(w, *ref)) expiry_heap_.push_back({until, w, key});
    });
  std::make_heap(expiry_heap_.begin(), expiry_heap_.end(), std::greater<>{});
}

std::uint32_t prefix_index::find_matches(std::span<const std::uint64_t> sequence_hashes,
                                         std::vector<std::uint32_t>& overlap_blocks) {
  overlap_blocks.assign(workers_.size(), 0);
  if (sequence_hashes.empty()) return 0;
  scratch_active_.assign(words_, 0);
  std::uint64_t* active = scratch_active_.data();

  std::uint32_t depth = 0;
  for (; depth < sequence_hashes.size(); ++depth) {
    const std::uint32_t* found = by_sequence_hash_.find(sequence_hashes[depth]);
    if (found == nullptr) break;
    // Workers 0-63 from the entry, the others from their own array.
    const std::uint64_t* extra = extra_holders_.data() + std::size_t{*found} * (words_ - 1);
    std::uint64_t any = 0;
    for (std::size_t w = 0; w < words_; ++w) {
      const std::uint64_t holders = w == 0 ? entries_[*found].holders : extra[w - 1];
      const std::uint64_t still = depth == 0 ? holders : (active[w] & holders);
      // Workers that drop out here cached exactly `depth` leading blocks.
      for (std::uint64_t dropped = active[w] & ~still; dropped != 0; dropped &= dropped - 1)
        overlap_blocks[w * bits_per_word + static_cast<std::size_t>(std::countr_zero(dropped))] = depth;
      active[w] = still;
      any |= still;
    }
    if (any == 0) break;
    entries_[*found].referenced = true;
  }
  for (std::size_t w = 0; w < words_; ++w)
    for (std::uint64_t word = active[w]; word != 0; word &= word - 1)
      overlap_blocks[w * bits_per_word + static_cast<std::size_t>(std::countr_zero(word))] = depth;
  return depth;
}

bool prefix_index::contains(worker_id worker, std::uint64_t sequence_hash) const {
  if (worker >= workers_.size()) return false;
  const std::uint32_t* found = by_sequence_hash_.find(sequence_hash);
  return found != nullptr && has_bit(*found, worker);
}

std::optional<std::uint64_t> prefix_index::sequence_hash_of(worker_id worker, std::uint64_t engine_hash) const {
  if (worker >= workers_.size()) return std::nullopt;
  const worker_block* ref = workers_[worker].blocks.find(engine_hash);
  if (ref == nullptr || !is_live(worker, *ref)) return std::nullopt;
  return entries_[ref->entry].sequence_hash;
}

void prefix_index::collect_worker_blocks(worker_id worker, std::vector<std::uint64_t>& out) const {
  if (worker >= workers_.size()) return;
  for (std::uint32_t e = 0; e < entries_.size(); ++e)
    if (entries_[e].in_use() && has_bit(e, worker)) out.push_back(entries_[e].sequence_hash);
}

std::uint64_t prefix_index::worker_blocks(worker_id worker) const {
  return worker < workers_.size() ? workers_[worker].live_blocks : 0;
}

std::size_t prefix_index::memory_bytes() const {
  std::size_t bytes = by_sequence_hash_.memory_bytes() + entries_.capacity() * sizeof(entry) +
                      extra_holders_.capacity() * sizeof(std::uint64_t) +
                      free_entries_.capacity() * sizeof(std::uint32_t) + expiry_heap_.capacity() * sizeof(expiry) +
                      workers_.capacity() * sizeof(worker_state);
  for (const worker_state& state : workers_) bytes += state.blocks.memory_bytes() + state.predicted_until.memory_bytes();
  return bytes;
}

}  // namespace kvr
