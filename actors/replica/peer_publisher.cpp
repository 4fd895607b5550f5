#include "actors/replica/peer_publisher.hpp"

#include <pthread.h>

#include <random>

#include "actors/replica/wall_clock.hpp"
#include "core/replica/peer_subjects.hpp"
#include "core/replica/peer_wire.hpp"

namespace kvr {
namespace {

using clock_type = std::chrono::steady_clock;

}  // namespace

peer_publisher::peer_publisher(peer_publisher_settings settings, sink publish)
    : settings_(std::move(settings)), publish_(std::move(publish)) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "kvr-peer-pub");
    loop();
  });
}

peer_publisher::~peer_publisher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void peer_publisher::attach(const std::string& name, const caf::actor_addr& scorer) {
  std::random_device random;
  std::lock_guard lock(mutex_);
  sets_[subject_token(name)] = set_state{.name = name, .scorer = scorer,
                                         .incarnation = (std::uint64_t{random()} << 32) | random()};
}

void peer_publisher::detach(const std::string& name, const caf::actor_addr& scorer) {
  std::lock_guard lock(mutex_);
  const auto it = sets_.find(subject_token(name));
  if (it != sets_.end() && it->second.scorer == scorer) sets_.erase(it);
}

peer_publisher::set_state* peer_publisher::find(const std::string& name, const caf::actor_addr& scorer) {
  const auto it = sets_.find(subject_token(name));
  return it == sets_.end() || it->second.scorer != scorer ? nullptr : &it->second;
}

void peer_publisher::share(const std::string& name, const caf::actor_addr& scorer, std::vector<peer_event> events) {
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    set_state* set = find(name, scorer);
    if (set == nullptr) return;
    const std::size_t room = settings_.max_pending_events - std::min(settings_.max_pending_events, set->events.size());
    if (events.size() > room) {
      counters_.queue_full.fetch_add(events.size() - room, std::memory_order_relaxed);
      events.resize(room);
    }
    if (events.empty()) return;
    if (set->events.empty()) {
      set->first_pending = clock_type::now();
      wake = true;  // the thread learns when this batch is due
    }
    wake |= set->events.size() + events.size() >= settings_.batch_events && set->events.size() < settings_.batch_events;
    set->events.insert(set->events.end(), std::make_move_iterator(events.begin()), std::make_move_iterator(events.end()));
  }
  if (wake) wake_.notify_one();
}

void peer_publisher::share_snapshot(const std::string& name, const caf::actor_addr& scorer,
                                    std::vector<peer_snapshot_entry> bookings) {
  {
    std::lock_guard lock(mutex_);
    set_state* set = find(name, scorer);
    if (set == nullptr) return;
    set->snapshot = std::move(bookings);  // a newer one covers everything an older one did
    set->snapshot_after = set->events.size();
  }
  wake_.notify_one();
}

void peer_publisher::take_due(std::vector<outgoing>& out) {
  const auto now = clock_type::now();
  for (auto& [token, set] : sets_) {
    const bool due = set.snapshot || set.events.size() >= settings_.batch_events ||
                     (!set.events.empty() && now - set.first_pending >= settings_.batch_delay);
    if (!due) continue;
    auto origin = [&] {
      return peer_origin{.replica = settings_.replica_id, .incarnation = set.incarnation, .sequence = ++set.sequence,
                         .sent_unix_ns = unix_now_ns()};
    };
    // The steps shared before the snapshot, the snapshot, then the steps shared after it: a
    // receiver applies them in this order, as they happened.
    auto send_events = [&](std::size_t from, std::size_t to) {
      for (std::size_t first = from; first < to; first += settings_.batch_events) {
        const auto begin = set.events.begin() + static_cast<std::ptrdiff_t>(first);
        const auto end = set.events.begin() + static_cast<std::ptrdiff_t>(std::min(to, first + settings_.batch_events));
        out.push_back({peer_subject(settings_.subject_prefix, set.name, peer_channel::bookings),
                       peer_bookings_message{.origin = origin(), .events = {std::make_move_iterator(begin), std::make_move_iterator(end)}}});
      }
    };
    const std::size_t before_snapshot = set.snapshot ? std::min(set.snapshot_after, set.events.size()) : set.events.size();
    send_events(0, before_snapshot);
    if (set.snapshot) {
      const std::vector<peer_snapshot_entry>& bookings = *set.snapshot;
      const std::size_t per_part = std::max<std::size_t>(1, settings_.snapshot_part_bookings);
      const auto parts = static_cast<std::uint32_t>(std::max<std::size_t>(1, (bookings.size() + per_part - 1) / per_part));
      for (std::uint32_t part = 0; part < parts; ++part) {
        const auto begin = bookings.begin() + static_cast<std::ptrdiff_t>(std::min(bookings.size(), part * per_part));
        const auto end = bookings.begin() + static_cast<std::ptrdiff_t>(std::min(bookings.size(), (part + 1) * per_part));
        out.push_back({peer_subject(settings_.subject_prefix, set.name, peer_channel::snapshot),
                       peer_snapshot_message{.origin = origin(), .part = part, .parts = parts, .bookings = {begin, end}}});
      }
      set.snapshot.reset();
    }
    send_events(before_snapshot, set.events.size());
    set.events.clear();
  }
}

void peer_publisher::loop() {
  std::vector<outgoing> batch;
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    // Sleep until the earliest pending batch is due (or something is due at once).
    std::optional<clock_type::time_point> next;
    bool now_due = false;
    for (const auto& [token, set] : sets_) {
      now_due |= set.snapshot.has_value() || set.events.size() >= settings_.batch_events;
      if (!set.events.empty() && (!next || set.first_pending + settings_.batch_delay < *next))
        next = set.first_pending + settings_.batch_delay;
    }
    if (!now_due) {
      if (next) wake_.wait_until(lock, *next);
      else wake_.wait(lock);
      if (stopping_) break;
    }
    take_due(batch);
    if (batch.empty()) continue;
    lock.unlock();
    for (const outgoing& message : batch) {
      const std::string bytes = std::visit([](const auto& m) { return encode_peer_message(m); }, message.message);
      if (publish_(message.subject, std::span(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()))) {
        counters_.sent.fetch_add(1, std::memory_order_relaxed);
        counters_.sent_bytes.fetch_add(bytes.size(), std::memory_order_relaxed);
      } else {
        counters_.not_connected.fetch_add(1, std::memory_order_relaxed);
      }
    }
    batch.clear();
    lock.lock();
  }
}

}  // namespace kvr
