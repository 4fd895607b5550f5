#pragma once
/// Where the replica hub leaves a set's peer messages for its scorer. The scorer takes them
/// before everything it does that reads routing state (a decision, a dispatch of its queue, a
/// status publish), so a decision always sees every message that arrived before it; the hub
/// wakes the scorer with a message of its own only when somebody needs the peers' news sooner:
/// when the scorer's queue holds requests a peer's finish may unblock, or when the status it
/// publishes for ingress (busy workers, /v1/router/sets) is due again. A CAF message per peer
/// message was a wake-up of a CAF worker each, the dearest part of receiving one.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

#include "messages/type_ids.hpp"

namespace kvr {

/// What push() did with a message.
enum class inbox_push { left, left_wake_scorer, full };

class peer_inbox {
 public:
  /// The scorer takes at least every peer check (250 ms); this many waiting means it is stuck,
  /// and more would only grow: beyond, messages are refused (the next snapshots heal).
  static constexpr std::size_t capacity = 1 << 16;

  /// Leaves `message` for the scorer; says when the caller should wake the scorer for it (at
  /// most once until the scorer takes what waits). `now` is the steady clock.
  inbox_push push(peer_message_ptr message, std::chrono::steady_clock::time_point now);
  /// Everything that waits, in arrival order.
  std::vector<peer_message_ptr> take();

  /// The scorer's status is due again at `when`: a message arriving from then on wakes it.
  void wake_from(std::chrono::steady_clock::time_point when) {
    wake_from_ns_.store(when.time_since_epoch().count(), std::memory_order_relaxed);
  }
  /// While the scorer's queue holds requests, every message wakes it.
  void set_queue_waiting(bool waiting) { queue_waiting_.store(waiting, std::memory_order_relaxed); }

 private:
  std::mutex mutex_;
  std::vector<peer_message_ptr> waiting_;
  bool woken_ = false;  ///< a wake-up went since the scorer last took
  std::atomic<std::int64_t> wake_from_ns_{0};
  std::atomic<bool> queue_waiting_{false};
};

}  // namespace kvr
