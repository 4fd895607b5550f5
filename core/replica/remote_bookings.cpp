#include "core/replica/remote_bookings.hpp"

#include <algorithm>

namespace kvr {

remote_bookings::remote_bookings(std::vector<std::string> worker_names, remote_bookings_settings settings)
    : worker_names_(std::move(worker_names)), settings_(settings) {
  for (worker_id w = 0; w < worker_names_.size(); ++w) worker_ids_.emplace(worker_names_[w], w);
}

active_sequences remote_bookings::fresh_bookings() const {
  return active_sequences(settings_.block_size, settings_.track_active_blocks, settings_.max_request_age);
}

std::optional<worker_id> remote_bookings::worker_of(std::string_view name) const {
  const auto it = worker_ids_.find(name);
  if (it == worker_ids_.end()) return std::nullopt;
  return it->second;
}

remote_bookings::peer* remote_bookings::admit(const peer_origin& origin, time_point now) {
  auto it = peers_.find(origin.replica);
  if (it == peers_.end()) {
    if (peers_.size() >= settings_.max_peers) {
      ++counters_.over_limit;
      return nullptr;
    }
    it = peers_.emplace(origin.replica, peer{.incarnation = origin.incarnation, .bookings = fresh_bookings()}).first;
  } else if (it->second.incarnation != origin.incarnation) {
    // The replica restarted (or a new process took its id): what the old one booked is gone.
    ++counters_.peers_restarted;
    it->second = peer{.incarnation = origin.incarnation, .bookings = fresh_bookings()};
  } else if (origin.sequence <= it->second.last_sequence) {
    ++counters_.stale;
    return nullptr;
  }
  peer& from = it->second;
  if (from.last_sequence != 0 && origin.sequence != from.last_sequence + 1) ++counters_.gaps;
  from.last_sequence = origin.sequence;
  from.last_heard = now;
  ++counters_.messages;
  return &from;
}

void remote_bookings::book(peer& from, const peer_event& event, time_point now, worker_id worker) {
  if (from.bookings.in_flight() >= settings_.max_bookings_per_peer) {
    ++counters_.over_limit;
    return;
  }
  from.bookings.book({event.request_id, worker, event.prompt_tokens, event.overlap_blocks}, now, event.sequence_hashes);
}

void remote_bookings::apply(const peer_snapshot_message& message, time_point now) {
  peer* from = admit(message.origin, now);
  if (from == nullptr) return;
  const std::uint64_t first = message.origin.sequence - message.part;
  if (from->assembling != first) {  // a new snapshot begins (an unfinished older one is abandoned)
    from->assembling = first;
    from->parts_seen = 0;
    from->assembled.clear();
  }
  if (from->parts_seen != message.part) return;  // a part went missing: wait for the next snapshot
  ++from->parts_seen;
  const std::size_t room = settings_.max_bookings_per_peer - std::min(settings_.max_bookings_per_peer, from->assembled.size());
  const std::size_t taken = std::min(room, message.bookings.size());
  counters_.over_limit += message.bookings.size() - taken;
  from->assembled.insert(from->assembled.end(), message.bookings.begin(), message.bookings.begin() + static_cast<std::ptrdiff_t>(taken));
  if (from->parts_seen == message.parts) replace(*from, now);
}

void remote_bookings::replace(peer& from, time_point now) {
  // Bookings the events already told keep their block hashes (snapshots carry none).
  active_sequences rebuilt = fresh_bookings();
  for (const peer_snapshot_entry& entry : from.assembled) {
    const auto worker = worker_of(entry.worker);
    if (!worker) {
      ++counters_.unknown_workers;
      continue;
    }
    rebuilt.book({entry.request_id, *worker, entry.prompt_tokens, entry.overlap_blocks}, now,
                 from.bookings.held_hashes(entry.request_id));
    if (entry.prefilled) rebuilt.first_token(entry.request_id);
  }
  from.bookings = std::move(rebuilt);
  from.assembled.clear();
  from.assembled.shrink_to_fit();
  from.last_snapshot = now;
  ++counters_.snapshots;
}

std::size_t remote_bookings::expire(time_point now) {
  const std::size_t dropped = std::erase_if(peers_, [&](const auto& item) { return now - item.second.last_heard > settings_.peer_timeout; });
  counters_.peers_dropped += dropped;
  for (auto& [name, p] : peers_) p.bookings.expire(now);
  return dropped;
}

void remote_bookings::add_loads(std::vector<worker_load>& loads) const {
  if (loads.size() < worker_names_.size()) loads.resize(worker_names_.size());
  for (const auto& [name, p] : peers_) {
    const auto peer_loads = p.bookings.loads();
    for (std::size_t w = 0; w < peer_loads.size() && w < loads.size(); ++w) loads[w] += peer_loads[w];
  }
}

worker_load remote_bookings::load(worker_id worker) const {
  worker_load total;
  for (const auto& [name, p] : peers_) total += p.bookings.load(worker);
  return total;
}

std::uint32_t remote_bookings::active_prefix_blocks(worker_id worker, std::span<const std::uint64_t> sequence_hashes) const {
  std::uint32_t most = 0;
  for (const auto& [name, p] : peers_) most = std::max(most, p.bookings.active_prefix_blocks(worker, sequence_hashes));
  return most;
}

std::vector<peer_view> remote_bookings::peers(time_point now) const {
  std::vector<peer_view> out;
  for (const auto& [name, p] : peers_)
    out.push_back({.replica = name,
                   .since_heard = now - p.last_heard,
                   .since_snapshot = p.last_snapshot ? std::optional(now - *p.last_snapshot) : std::nullopt,
                   .bookings = p.bookings.in_flight()});
  std::sort(out.begin(), out.end(), [](const peer_view& a, const peer_view& b) { return a.replica < b.replica; });
  return out;
}

}  // namespace kvr
