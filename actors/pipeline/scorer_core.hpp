#pragma once
/// A worker set's routing state (`core/routing/worker_set_router`, its admission queue, its
/// replica links) behind one mutex. The scorer actor holds it for each of its messages; an
/// ingress I/O thread or a hasher takes it, when it is free, to decide a request itself or to
/// apply a step of a request's life. A decision through the actor cost two thread wake-ups
/// (the job to the actor, its answer back), more CPU than the decision itself; taken here it
/// costs an uncontended lock. Where the state is busy (the scorer applying KV events, another
/// thread deciding) or the request must wait in the queue, the job goes to the actor as before.
///
/// Steps of a request's life (first token, end, failure) keep their order whoever applies
/// them: a step is left in a list that whoever holds the state next applies first, before
/// anything else it does, and the scorer is woken for it only when nobody holds the state at
/// once. A retry's decision therefore always sees its failed attempt released.

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/routing/admission_queue.hpp"
#include "core/routing/worker_set_router.hpp"
#include "messages/route_messages.hpp"
#include "messages/scorer_actor.hpp"

namespace kvr {

class replica_hub;
class peer_inbox;
class scorer_snapshot_cell;

/// The query routing answers for a job.
[[nodiscard]] route_query query_of(const route_job& job);
/// A decision that chose no worker, for `why`.
[[nodiscard]] route_decision failed_with(route_failure why);

class scorer_core {
 public:
  using clock_type = std::chrono::steady_clock;

  /// What the lock guards. Its functions assume the caller holds it.
  struct state {
    std::optional<worker_set_router> router;
    std::shared_ptr<scorer_snapshot_cell> snapshot;
    /// Requests that found every worker busy (only ever filled where the set queues).
    std::optional<admission_queue<route_job_ptr>> queue;
    admission_status admission;
    // Replica sync (replicas null: none).
    std::shared_ptr<replica_hub> replicas;
    std::shared_ptr<peer_inbox> inbox;  ///< the peers' messages for this set, left by the hub
    std::string set_name;
    caf::actor_addr scorer;                 ///< the set's scorer, as the replica hub knows it
    clock_type::time_point published_at{};  ///< of the last status publish_soon() made
    bool status_stale = false;              ///< a change publish_soon() left for the peer check

    /// The status ingress reads (/metrics, /ready, local picks), published now.
    void publish();
    /// After every change to the queue: ingress reads its depth live, and while requests wait
    /// every peer message wakes the scorer (a peer's finish may free a worker for them).
    void publish_depth();
    /// A status published now for the peers' news: the next is due in 10 ms (publish_soon), and
    /// a peer message arriving from then on wakes the scorer for it.
    void published_status(clock_type::time_point now);
    /// Replica sync only: the status republished at most every 10 ms while it changes.
    void publish_soon();
    /// Routes queued requests, best first, while a worker is free for them.
    void dispatch(time_point now);
    /// Answers the queued requests that waited too long.
    void expire_queue(time_point now);
    /// After routing and lifecycle steps: the outbox goes to the peers (the replica hub batches).
    void after_booking_steps();
    /// Capacity may have freed (an end, a first token, fresh metrics, a peer's finish): serve
    /// the queue; then the booking steps taken so far go to the peers.
    void on_capacity_change();
    /// Applies the peers' messages that wait in the inbox.
    void take_peer_messages();
    /// Applies steps of requests' lives, in order.
    void apply_steps(const std::vector<lifecycle_event>& steps);
  };

  /// The state, held (the lock released with it). Taking it applies the steps left for it first.
  class held {
   public:
    held(std::unique_lock<std::mutex> lock, state& s) : lock_(std::move(lock)), state_(&s) {}
    state& operator*() const { return *state_; }
    state* operator->() const { return state_; }

   private:
    std::unique_lock<std::mutex> lock_;
    state* state_;
  };

  scorer_core(worker_set_router_settings routing, std::shared_ptr<scorer_snapshot_cell> snapshot,
              std::shared_ptr<replica_hub> replicas, std::string set_name);

  // -- any thread (ingress, hashers) --

  /// The decision for `query` if the state is free, the set is live, no request waits in the
  /// queue ahead of it and a worker can take it; the request is booked. Nullopt: send the job
  /// to the scorer (which queues it where it must wait).
  [[nodiscard]] std::optional<route_decision> try_decide(const route_query& query);
  /// Applies `step` (of a request the scorer side routed) now if the state is free; else leaves
  /// it for whoever holds the state next, and wakes `scorer` for it unless a wake-up for
  /// waiting steps is already on its way.
  void report(const lifecycle_event& step, const scorer_actor& scorer);

  // -- the scorer actor --

  /// Waits for the state; the scorer's every message holds it.
  [[nodiscard]] held hold();
  /// The scorer was woken for waiting steps (`steps_waiting_atom`): they apply now, and the
  /// next step left behind a busy state wakes it again.
  void apply_waiting_steps();
  /// The scorer is gone: no decision is taken here any more (jobs go to the dead actor, whose
  /// sinks answer that the set was reconfigured), and steps are dropped as its mail would be.
  void retire();
  [[nodiscard]] bool retired() const { return retired_.load(std::memory_order_relaxed); }
  /// Steps left behind a busy state: how many wait now.
  [[nodiscard]] std::size_t steps_waiting() const;

 private:
  [[nodiscard]] std::optional<held> try_hold();
  /// The steps left waiting, taken; with none left and `scorer_rests_if_none`, the scorer is
  /// marked not woken (the next step left behind a busy state wakes it).
  [[nodiscard]] std::vector<lifecycle_event> take_steps(bool scorer_rests_if_none);

  std::mutex mutex_;
  state state_;
  std::atomic<bool> retired_{false};
  mutable std::mutex steps_mutex_;
  std::vector<lifecycle_event> steps_;  ///< left behind a busy state, in order
  bool scorer_woken_ = false;          ///< a steps_waiting_atom is on its way
};

}  // namespace kvr
