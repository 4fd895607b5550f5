#pragma once
/// A worker set's scorer: the actor around `core/routing/worker_set_router`. It unpacks
/// messages, calls the router with the time, replies, and publishes the router's status for
/// ingress; every routing decision is the router's. The router lives in a `scorer_core` the
/// actor shares with ingress and the hashers, who decide there themselves when it is free.

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/pipeline/scorer_core.hpp"
#include "core/routing/worker_set_router.hpp"
#include "messages/scorer_actor.hpp"

namespace kvr {

/// What the scorer publishes for ingress (/metrics, /ready) about once a second and after
/// health changes; read without messaging the actor.
using scorer_snapshot = worker_set_status;

/// The latest snapshot, shared between the scorer and ingress threads.
class scorer_snapshot_cell {
 public:
  void store(std::shared_ptr<const scorer_snapshot> snapshot) {
    std::lock_guard lock(mutex_);
    snapshot_ = std::move(snapshot);
  }
  [[nodiscard]] std::shared_ptr<const scorer_snapshot> load() const {
    std::lock_guard lock(mutex_);
    return snapshot_;
  }

  /// The queue's depth by priority class, live (a burst fills and drains it within a second).
  void store_queue_depth(request_priority priority, std::uint64_t depth) {
    queue_depth_[static_cast<std::size_t>(priority)].store(depth, std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t queue_depth(request_priority priority) const {
    return queue_depth_[static_cast<std::size_t>(priority)].load(std::memory_order_relaxed);
  }

 private:
  std::array<std::atomic<std::uint64_t>, priority_classes> queue_depth_{};
  mutable std::mutex mutex_;
  std::shared_ptr<const scorer_snapshot> snapshot_ = std::make_shared<scorer_snapshot>();
};

class replica_hub;

struct scorer_settings {
  worker_set_router_settings routing;
  std::shared_ptr<scorer_snapshot_cell> snapshot = std::make_shared<scorer_snapshot_cell>();
  /// Replica sync (null: a lone router). The set's booking steps go to the hub as they happen
  /// (it batches them), and a snapshot of its bookings every second; `routing.share_bookings`
  /// must be on.
  std::shared_ptr<replica_hub> replicas;
  std::string set_name;
};

/// A running scorer: its actor, and the routing state it shares.
struct scorer_handle {
  scorer_actor actor;
  std::shared_ptr<scorer_core> core;
};

/// Spawns a scorer for one worker set.
scorer_handle spawn_scorer(caf::actor_system& system, scorer_settings settings);

}  // namespace kvr
