#pragma once
/// Routing that an I/O thread does itself. Round-robin and random decisions read no loads and
/// no index, so asking the scorer would only add a thread hop (two wake-ups and a context
/// switch per request, most of the router's CPU cost when proxying small answers). The thread
/// picks among the set's healthy workers and reports the bookings to the scorer in batches: the
/// scorer still owns every worker's load and counters, they just reach it a little later.

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "actors/http/routing_table.hpp"
#include "core/routing/selector/selector.hpp"
#include "messages/route_messages.hpp"

namespace kvr {

/// One I/O thread's picker for sets where `decides_without_state` holds.
class local_router {
 public:
  explicit local_router(std::uint64_t seed) : rng_(seed) {}

  /// The worker for one request: the set's workers the scorer last published as healthy (all
  /// of them before its first snapshot), minus `excluded`, chosen by the set's mode. nullopt
  /// when none is left.
  [[nodiscard]] std::optional<std::uint32_t> pick(const worker_set_route& set, std::span<const std::uint32_t> excluded);

 private:
  selector_rng rng_;
  std::vector<worker_candidate> candidates_;
};

/// Collects one I/O thread's lifecycle events per scorer, in the order they happen, and sends
/// each scorer its batch on flush(). The caller flushes on a short timer, and at once after a
/// worker failure (the scorer must keep that worker out before the next pick).
class lifecycle_reporter {
 public:
  /// Queues `event` for `scorer`. True when nothing was queued before (arm the flush timer).
  bool add(const scorer_actor& scorer, const lifecycle_event& event);
  /// Sends what is queued: one message per scorer.
  void flush();
  [[nodiscard]] bool empty() const { return queued_ == 0; }

 private:
  struct per_scorer {
    scorer_actor scorer;
    std::vector<lifecycle_event> events;
  };
  std::vector<per_scorer> pending_;  ///< few entries (one per worker set this thread served)
  std::size_t queued_ = 0;
};

}  // namespace kvr
