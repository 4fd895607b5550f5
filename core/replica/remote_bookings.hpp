#pragma once
/// The bookings other router replicas made on one worker set, kept apart per replica (origin):
/// each origin's booking events are applied as they come, its snapshot replaces everything
/// known of it (a lost "finished" heals within a snapshot interval), and an origin silent for
/// `peer_timeout` is dropped with all its bookings (a replica killed with -9 leaves no phantom
/// load). Workers are matched by name, so replicas with different worker lists agree on the
/// workers they share and count what they cannot place. Time is passed in.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/common/time.hpp"
#include "core/replica/peer_messages.hpp"
#include "core/routing/active_sequences.hpp"

namespace kvr {

struct remote_bookings_settings {
  std::uint32_t block_size = 16;
  bool track_active_blocks = true;
  duration peer_timeout = std::chrono::seconds(3);
  duration max_request_age = std::chrono::seconds(3600);
  /// Bounds on what peers can make this replica hold (beyond: counted and dropped).
  std::size_t max_peers = 256;
  std::size_t max_bookings_per_peer = 1 << 18;
};

struct remote_bookings_counters {
  std::uint64_t messages = 0;         ///< applied (bookings messages and snapshot parts)
  std::uint64_t events = 0;           ///< booking events applied
  std::uint64_t unknown_workers = 0;  ///< bookings on a worker this replica does not have, dropped
  std::uint64_t gaps = 0;             ///< messages lost between two that came (healed by the next snapshot)
  std::uint64_t snapshots = 0;        ///< whole snapshots applied
  std::uint64_t peers_dropped = 0;    ///< silent for peer_timeout
  std::uint64_t peers_restarted = 0;  ///< a new incarnation of a known replica id
  std::uint64_t over_limit = 0;       ///< bookings or peers beyond the bounds, dropped
  std::uint64_t stale = 0;            ///< messages older than what was already applied, dropped
};

/// One peer as seen from here.
struct peer_view {
  std::string replica;
  duration since_heard{};
  std::optional<duration> since_snapshot;  ///< none before its first whole snapshot
  std::size_t bookings = 0;
};

class remote_bookings {
 public:
  remote_bookings(std::vector<std::string> worker_names, remote_bookings_settings settings);

  /// A peer's booking events, in order. `booked` gets, for every booked event placed on a
  /// worker here, that worker and the event (approximate mode learns its prediction from it).
  template <class OnBooked>
  void apply(const peer_bookings_message& message, time_point now, OnBooked&& booked);
  void apply(const peer_bookings_message& message, time_point now) {
    apply(message, now, [](worker_id, const peer_event&) {});
  }
  /// A part of a peer's snapshot; the whole replaces that peer's bookings once every part came.
  void apply(const peer_snapshot_message& message, time_point now);
  /// Drops the peers silent for longer than `peer_timeout`, and bookings older than the
  /// maximum age; returns how many peers went.
  std::size_t expire(time_point now);

  [[nodiscard]] bool empty() const { return peers_.empty(); }
  /// The worker of this set called `name`, if there is one.
  [[nodiscard]] std::optional<worker_id> worker_of(std::string_view name) const;
  /// Adds every peer's load on each worker into `loads` (indexed by worker id, sized to fit).
  void add_loads(std::vector<worker_load>& loads) const;
  [[nodiscard]] worker_load load(worker_id worker) const;
  /// The most leading blocks of a prompt any peer's in-flight requests hold on `worker`.
  [[nodiscard]] std::uint32_t active_prefix_blocks(worker_id worker, std::span<const std::uint64_t> sequence_hashes) const;
  [[nodiscard]] std::vector<peer_view> peers(time_point now) const;
  [[nodiscard]] const remote_bookings_counters& counters() const { return counters_; }

 private:
  struct peer {
    std::uint64_t incarnation = 0;
    std::uint64_t last_sequence = 0;
    time_point last_heard{};
    std::optional<time_point> last_snapshot;
    active_sequences bookings;
    /// The snapshot being assembled: the sequence of its part 0, and the parts that came.
    std::uint64_t assembling = 0;
    std::uint32_t parts_seen = 0;
    std::vector<peer_snapshot_entry> assembled;
  };

  /// The peer a message comes from, made or renewed for its incarnation; null when the
  /// message is stale or over the bounds (counted).
  peer* admit(const peer_origin& origin, time_point now);
  void book(peer& from, const peer_event& event, time_point now, worker_id worker);
  void replace(peer& from, time_point now);
  [[nodiscard]] active_sequences fresh_bookings() const;

  std::vector<std::string> worker_names_;
  /// Looked up by the names in peer messages without copying them.
  struct name_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view name) const { return std::hash<std::string_view>{}(name); }
  };
  std::unordered_map<std::string, worker_id, name_hash, std::equal_to<>> worker_ids_;
  remote_bookings_settings settings_;
  std::unordered_map<std::string, peer> peers_;
  remote_bookings_counters counters_;
};

template <class OnBooked>
void remote_bookings::apply(const peer_bookings_message& message, time_point now, OnBooked&& booked) {
  peer* from = admit(message.origin, now);
  if (from == nullptr) return;
  for (const peer_event& event : message.events) {
    ++counters_.events;
    switch (event.what) {
      case peer_event::kind::booked: {
        const auto worker = worker_of(event.worker);
        if (!worker) {
          ++counters_.unknown_workers;
          break;
        }
        book(*from, event, now, *worker);
        booked(*worker, event);
        break;
      }
      case peer_event::kind::first_token: from->bookings.first_token(event.request_id); break;
      case peer_event::kind::finished: from->bookings.release(event.request_id); break;
    }
  }
}

}  // namespace kvr
