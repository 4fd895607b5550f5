#pragma once
/// The sending half of replica sync: scorers hand it their sets' booking steps and snapshots,
/// and its own thread batches each set's steps (one message per `batch_delay`, at most
/// `batch_events` steps each), numbers them, encodes them and publishes them. Scorers never
/// wait and set no timers: a hand-over is a push under a mutex. A set's snapshot goes after the
/// steps handed over before it, in parts of at most `snapshot_part_bookings`.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <caf/actor_addr.hpp>

#include "core/replica/peer_messages.hpp"

namespace kvr {

struct peer_publisher_settings {
  std::string replica_id;
  std::string subject_prefix = "kvrouter";
  std::chrono::microseconds batch_delay{1000};
  std::size_t batch_events = 256;
  std::size_t snapshot_part_bookings = 4096;
  std::size_t max_pending_events = 1 << 16;  ///< per set, waiting to go; beyond, dropped (counted)
};

struct peer_publisher_counters {
  std::atomic<std::uint64_t> sent{0}, sent_bytes{0};
  std::atomic<std::uint64_t> not_connected{0};  ///< messages not published: NATS was down
  std::atomic<std::uint64_t> queue_full{0};     ///< booking steps dropped: the set's backlog was full
};

class peer_publisher {
 public:
  /// Publishes one message; false when it could not (not connected).
  using sink = std::function<bool(const std::string& subject, std::span<const std::uint8_t> bytes)>;

  peer_publisher(peer_publisher_settings settings, sink publish);
  ~peer_publisher();
  peer_publisher(const peer_publisher&) = delete;
  peer_publisher& operator=(const peer_publisher&) = delete;

  /// `scorer` speaks for set `name` from now on, as a new incarnation (its peers start afresh).
  void attach(const std::string& name, const caf::actor_addr& scorer);
  void detach(const std::string& name, const caf::actor_addr& scorer);
  /// Booking steps of `name`; ignored unless `scorer` is the set's attached one.
  void share(const std::string& name, const caf::actor_addr& scorer, std::vector<peer_event> events);
  /// The set's in-flight bookings, published after the steps shared before (a later snapshot
  /// not yet sent replaces an earlier one).
  void share_snapshot(const std::string& name, const caf::actor_addr& scorer, std::vector<peer_snapshot_entry> bookings);

  [[nodiscard]] const peer_publisher_counters& counters() const { return counters_; }

 private:
  struct set_state {
    std::string name;
    caf::actor_addr scorer;
    std::uint64_t incarnation = 0;
    std::uint64_t sequence = 0;
    std::vector<peer_event> events;
    std::optional<std::vector<peer_snapshot_entry>> snapshot;
    std::size_t snapshot_after = 0;  ///< of `events`, the ones shared before the snapshot was taken
    std::chrono::steady_clock::time_point first_pending{};
  };
  /// A message ready to encode, numbered.
  struct outgoing {
    std::string subject;
    peer_message message;
  };

  set_state* find(const std::string& name, const caf::actor_addr& scorer);  ///< under mutex_
  void loop();
  /// Moves what is due out of the sets, numbered (under mutex_).
  void take_due(std::vector<outgoing>& out);

  peer_publisher_settings settings_;
  sink publish_;
  peer_publisher_counters counters_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::unordered_map<std::string, set_state> sets_;  ///< by subject token
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kvr
