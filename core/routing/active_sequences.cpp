#include "core/routing/active_sequences.hpp"

#include <algorithm>

namespace kvr {
namespace {

std::int64_t to_ns(time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

active_sequences::active_sequences(std::uint32_t block_size, bool track_active_blocks, duration max_age)
    : block_size_(std::max<std::uint32_t>(block_size, 1)),
      track_active_blocks_(track_active_blocks),
      max_age_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(max_age).count()) {}

bool active_sequences::book(const booking& request, time_point now, std::span<const std::uint64_t> sequence_hashes) {
  const std::uint64_t cached_tokens = std::uint64_t{request.overlap_blocks} * block_size_;
  const std::uint32_t blocks = (request.prompt_tokens + block_size_ - 1) / block_size_;
  if (!track_active_blocks_ || sequence_hashes.size() > blocks) sequence_hashes = {};
  active entry{
      .worker = request.worker,
      .prefill_tokens = request.prompt_tokens > cached_tokens ? static_cast<std::uint32_t>(request.prompt_tokens - cached_tokens) : 0,
      .private_blocks = track_active_blocks_ ? blocks - static_cast<std::uint32_t>(sequence_hashes.size()) : 0,
      .prompt_tokens = request.prompt_tokens,
      .overlap_blocks = request.overlap_blocks,
      .booked_at_ns = to_ns(now),
  };
  auto [stored, inserted] = bookings_.try_emplace(request.request_id, entry);
  if (!inserted) {
    ++counters_.duplicate_bookings;
    return false;
  }
  if (request.worker >= loads_.size()) {
    loads_.resize(request.worker + 1);
    held_.resize(request.worker + 1);
  }
  worker_load& load = loads_[request.worker];
  load.prefill_tokens += stored->prefill_tokens;
  load.decode_blocks += stored->private_blocks;
  ++load.requests;
  ++load.awaiting_first_token;
  if (!sequence_hashes.empty()) {
    hold(request.worker, sequence_hashes);
    hashes_of_.emplace(request.request_id, std::vector<std::uint64_t>(sequence_hashes.begin(), sequence_hashes.end()));
  }
  by_age_.emplace_back(entry.booked_at_ns, request.request_id);
  ++counters_.booked;
  if (by_age_.size() > 2 * bookings_.size() + 1024) compact_age_queue();
  return true;
}

void active_sequences::hold(worker_id worker, std::span<const std::uint64_t> hashes) {
  for (std::uint64_t h : hashes) {
    auto [count, added] = held_[worker].try_emplace(h, 0);
    if ((*count)++ == 0) ++loads_[worker].decode_blocks;
  }
}

void active_sequences::drop(worker_id worker, std::span<const std::uint64_t> hashes) {
  auto& held = held_[worker];
  std::uint64_t emptied = 0;
  for (std::uint64_t h : hashes) {
    held.update_or_erase(h, [&emptied](std::uint32_t& count) {
      if (--count != 0) return false;
      ++emptied;
      return true;
    });
  }
  loads_[worker].decode_blocks -= emptied;
}

std::uint32_t active_sequences::active_prefix_blocks(worker_id worker, std::span<const std::uint64_t> sequence_hashes) const {
  if (worker >= held_.size() || held_[worker].empty()) return 0;
  const auto& held = held_[worker];
  std::size_t low = 0, high = sequence_hashes.size();  // the first `low` blocks are held; block `high` is not
  while (low < high) {
    const std::size_t mid = low + (high - low + 1) / 2;
    if (held.find(sequence_hashes[mid - 1]) != nullptr) low = mid;
    else high = mid - 1;
  }
  return static_cast<std::uint32_t>(low);
}

bool active_sequences::first_token(std::uint64_t request_id) {
  active* entry = bookings_.find(request_id);
  if (entry == nullptr) {
    ++counters_.unknown_releases;
    return false;
  }
  loads_[entry->worker].prefill_tokens -= entry->prefill_tokens;
  entry->prefill_tokens = 0;
  if (!entry->first_token_came) --loads_[entry->worker].awaiting_first_token;
  entry->first_token_came = true;
  return true;
}

bool active_sequences::release(std::uint64_t request_id) {
  const active* entry = bookings_.find(request_id);
  if (entry == nullptr) {
    ++counters_.unknown_releases;
    return false;
  }
  worker_load& load = loads_[entry->worker];
  load.prefill_tokens -= entry->prefill_tokens;
  load.decode_blocks -= entry->private_blocks;
  --load.requests;
  if (!entry->first_token_came) --load.awaiting_first_token;
  if (auto hashes = hashes_of_.find(request_id); hashes != hashes_of_.end()) {
    drop(entry->worker, hashes->second);
    hashes_of_.erase(hashes);
  }
  bookings_.erase(request_id);
  ++counters_.released;
  return true;
}

std::size_t active_sequences::expire(time_point now) {
  const std::int64_t cutoff = to_ns(now) - max_age_ns_;
  std::size_t expired = 0;
  while (!by_age_.empty() && by_age_.front().first <= cutoff) {
    const auto [booked_at, id] = by_age_.front();
    by_age_.pop_front();
    const active* entry = bookings_.find(id);
    if (entry == nullptr || entry->booked_at_ns != booked_at) continue;  // already released
    release(id);
    ++expired;
  }
  counters_.expired += expired;
  return expired;
}

void active_sequences::compact_age_queue() {
  // Released bookings leave their queue entry behind; drop those so the queue stays
  // proportional to what is in flight.
  std::erase_if(by_age_, [&](const auto& item) {
    const active* entry = bookings_.find(item.second);
    return entry == nullptr || entry->booked_at_ns != item.first;
  });
}

worker_load active_sequences::load(worker_id worker) const {
  return worker < loads_.size() ? loads_[worker] : worker_load{};
}

}  // namespace kvr
