#pragma once
/// A worker set's scorer: owns the set's prefix index, the booked loads of its workers and
/// their health; decides where each request goes (core/routing/selector) and books it.

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/config/router_config.hpp"
#include "messages/scorer_actor.hpp"

namespace kvr {

/// What the scorer publishes for ingress (/metrics, /ready) about once a second and after
/// health changes; read without messaging the actor.
struct scorer_snapshot {
  struct worker {
    std::string name;
    bool healthy = true;
    std::uint64_t prefill_tokens = 0;
    std::uint64_t decode_blocks = 0;
    std::uint32_t requests = 0;
    std::uint64_t index_blocks = 0;
    std::uint64_t routed = 0;
    std::uint64_t failures = 0;
  };
  std::vector<worker> workers;
  std::uint64_t routed = 0;
  std::uint64_t dry_runs = 0;
  std::uint64_t unroutable = 0;
  std::uint64_t expired_bookings = 0;
  std::uint64_t index_blocks = 0;
  std::uint64_t kv_batches = 0;
};

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

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const scorer_snapshot> snapshot_ = std::make_shared<scorer_snapshot>();
};

struct scorer_settings {
  router_config config;                     ///< the set's effective config
  std::vector<std::string> worker_names;    ///< routable workers, indexed by worker id
  /// KV publishers (index ids) -> their worker; empty = one publisher per worker (identity),
  /// as in approximate mode.
  std::vector<std::uint32_t> publisher_worker;
  std::vector<std::string> publisher_names;  ///< for dumps; empty = the worker names
  std::chrono::milliseconds unhealthy_backoff{5000};
  std::chrono::seconds max_request_age{3600};  ///< bookings older than this are presumed lost
  /// A worker the health checker reports down keeps its index entries this long (a short
  /// outage loses nothing), then they are dropped.
  std::chrono::seconds index_grace{60};
  std::shared_ptr<scorer_snapshot_cell> snapshot = std::make_shared<scorer_snapshot_cell>();
  std::uint64_t seed = 0x5eed;               ///< the selector's random tie-breaks
};

/// Spawns a scorer for one worker set.
scorer_actor spawn_scorer(caf::actor_system& system, scorer_settings settings);


}  // namespace kvr
