#include "actors/pipeline/scorer.hpp"

#include <optional>

#include <nlohmann/json.hpp>

#include "actors/replica/replica_hub.hpp"
#include "core/routing/admission_queue.hpp"

namespace kvr {
namespace {

using clock_type = std::chrono::steady_clock;
using scorer_pointer = scorer_actor::stateful_pointer<struct scorer_state>;

struct scorer_state {
  std::optional<worker_set_router> router;
  std::shared_ptr<scorer_snapshot_cell> snapshot;
  /// Requests that found every worker busy (only ever filled where the set queues).
  std::optional<admission_queue<route_job_ptr>> queue;
  admission_status admission;
  std::optional<time_point> check_at;  ///< when the pending queue_check_atom fires
  // Replica sync (replicas null: none).
  std::shared_ptr<replica_hub> replicas;
  std::shared_ptr<peer_inbox> inbox;  ///< the peers' messages for this set, left by the hub
  std::string set_name;
  clock_type::time_point published_at{};  ///< of the last status publish_soon() made
  bool status_stale = false;              ///< a change publish_soon() left for the peer check

  void publish() {
    auto status = std::make_shared<scorer_snapshot>(router->status(clock_type::now()));
    status->admission = admission;
    snapshot->store(std::move(status));
  }

  /// After every change to the queue: ingress reads its depth live, and while requests wait
  /// every peer message wakes the scorer (a peer's finish may free a worker for them).
  void publish_depth() {
    for (std::size_t c = 0; c < priority_classes; ++c) {
      const auto priority = static_cast<request_priority>(c);
      snapshot->store_queue_depth(priority, queue->size(priority));
    }
    if (inbox) inbox->set_queue_waiting(!queue->empty());
  }

  /// A status published now for the peers' news: the next is due in 10 ms (publish_soon), and a
  /// peer message arriving from then on wakes the scorer for it.
  void published_status(clock_type::time_point now) {
    published_at = now;
    status_stale = false;
    if (inbox) inbox->wake_from(now + std::chrono::milliseconds(10));
  }
};

route_query query_of(const route_job& job) {
  return {.request_id = job.request_id,
          .sequence_hashes = job.sequence_hashes,
          .prompt_tokens = job.prompt_tokens > 0 ? job.prompt_tokens : job.request->prompt_tokens,
          .excluded_workers = job.excluded_workers,
          .dry_run = job.dry_run,
          .session = job.session,
          .disaggregate = job.disaggregate};
}

route_decision failure(route_failure why) {
  route_decision decision;
  decision.failure = why;
  return decision;
}

/// Wakes the scorer when the queue's oldest request times out.
void arm_queue_check(scorer_pointer self) {
  auto& s = self->state;
  const auto due = s.queue->next_timeout();
  if (!due || (s.check_at && *s.check_at <= *due)) return;
  s.check_at = *due;
  self->delayed_send(self, *due - clock_type::now() + std::chrono::milliseconds(1), queue_check_atom_v);
}

/// Routes queued requests, best first, while a worker is free for them.
void dispatch(scorer_pointer self, time_point now) {
  auto& s = self->state;
  while (const auto* head = s.queue->head(now)) {
    route_decision decision = s.router->decide(query_of(*head->payload), now);
    if (decision.failure == route_failure::every_worker_busy) return;
    auto entry = s.queue->pop_head(now);
    ++s.admission.admitted_after_wait;
    decision.queued_for = now - entry.arrival;
    if (decision.ok()) s.admission.wait.record(decision.queued_for);
    entry.payload->reply(std::move(decision));
    s.publish_depth();
  }
}

void expire_queue(scorer_pointer self, time_point now) {
  auto& s = self->state;
  s.queue->expire(now, [&](auto&& entry) {
    ++s.admission.timed_out;
    entry.payload->reply(failure(route_failure::queue_timeout));
  });
  s.publish_depth();
}

void route(scorer_pointer self, const route_job_ptr& job) {
  auto& s = self->state;
  const auto now = clock_type::now();
  // Behind requests already waiting, a new one waits too (dispatch serves it in its turn).
  if (s.queue->empty() || job->dry_run) {
    route_decision decision = s.router->decide(query_of(*job), now);
    if (decision.failure != route_failure::every_worker_busy) return job->reply(std::move(decision));
  }
  if (!s.queue->push(job->request_id, job->priority, now, job)) {
    ++s.admission.rejected_full;
    return job->reply(failure(route_failure::queue_full));
  }
  s.publish_depth();
  dispatch(self, now);
  arm_queue_check(self);
}

/// Hands this replica's bookings in flight to the peers (after the steps shared before).
void publish_own_bookings(scorer_pointer self) {
  auto& s = self->state;
  if (s.replicas) s.replicas->share_snapshot(s.set_name, self->address(), s.router->own_bookings());
}

/// The status ingress reads, republished at most every 10 ms while it changes (replica sync
/// only: the peers' loads change it without any request here, and /v1/router/sets should show
/// what the replicas agree on, not a second-old view). A change within 10 ms of the last
/// publish waits for the next peer check (250 ms): no timer per change.
void publish_soon(scorer_pointer self) {
  auto& s = self->state;
  if (!s.replicas) return;
  const auto now = clock_type::now();
  if (now - s.published_at < std::chrono::milliseconds(10)) {
    s.status_stale = true;
    return;
  }
  s.publish();
  s.published_status(now);
}

/// After routing and lifecycle steps: the outbox goes to the peers (the replica hub batches).
void after_booking_steps(scorer_pointer self) {
  auto& s = self->state;
  if (!s.replicas || s.router->outbox_size() == 0) return;
  s.replicas->share(s.set_name, self->address(), s.router->take_outbox());
  publish_soon(self);
}

/// Capacity may have freed (an end, a first token, fresh metrics, a peer's finish): serve the
/// queue; then the booking steps taken so far go to the peers.
void on_capacity_change(scorer_pointer self) {
  if (!self->state.queue->empty()) dispatch(self, clock_type::now());
  after_booking_steps(self);
}

/// Applies the peers' messages that wait in the inbox. Called first by every handler that
/// reads routing state, so what arrived before a decision counts in it.
void take_peer_messages(scorer_pointer self) {
  auto& s = self->state;
  if (!s.inbox) return;
  const auto messages = s.inbox->take();
  if (messages.empty()) return;
  const auto now = clock_type::now();
  for (const peer_message_ptr& message : messages)
    std::visit([&](const auto& m) { s.router->on_peer_message(m, now); }, *message);
  publish_soon(self);
  on_capacity_change(self);  // a peer's finish may free a worker this set's queue waits for
}

scorer_actor::behavior_type scorer(scorer_pointer self, scorer_settings settings) {
  auto& s = self->state;
  s.admission.enabled = queues_when_busy(settings.routing.config);
  s.queue.emplace(admission_settings_of(settings.routing.config));
  s.router.emplace(std::move(settings.routing));
  s.snapshot = std::move(settings.snapshot);
  s.replicas = std::move(settings.replicas);
  s.set_name = std::move(settings.set_name);
  if (s.replicas) {
    s.inbox = std::make_shared<peer_inbox>();
    s.replicas->attach(s.set_name, self->address(), s.inbox);
    self->attach_functor([replicas = s.replicas, name = s.set_name, me = self->address()] { replicas->detach(name, me); });
    self->delayed_send(self, std::chrono::milliseconds(250), peer_check_atom_v);
  }
  s.publish();
  s.publish_depth();
  self->delayed_send(self, std::chrono::seconds(1), tick_atom_v);

  return {
      [self](const kv_updates& updates) {
        const auto now = clock_type::now();
        for (const kv_update& update : *updates)
          self->state.router->on_kv_batch(update.publisher, update.clear_first, update.batch, now);
      },
      [self](const route_job_ptr& job) {
        take_peer_messages(self);
        route(self, job);
        after_booking_steps(self);
      },
      [self](withdraw_atom, std::uint64_t request_id) {
        auto& s = self->state;
        if (auto job = s.queue->remove(request_id)) {
          ++s.admission.withdrawn;
          s.publish_depth();
          (*job)->reply(failure(route_failure::queue_timeout));  // nobody reads it: the client is gone
        }
      },
      [self](const lifecycle_event& event) {
        take_peer_messages(self);
        auto& s = self->state;
        s.router->on_lifecycle(event, clock_type::now());
        if (event.what == lifecycle_event::kind::worker_failed) s.publish();
        on_capacity_change(self);
      },
      [self](const lifecycle_batch_ptr& batch) {
        take_peer_messages(self);
        auto& s = self->state;
        const auto now = clock_type::now();
        bool failures = false;
        for (const lifecycle_event& event : *batch) {
          s.router->on_lifecycle(event, now);
          failures |= event.what == lifecycle_event::kind::worker_failed;
        }
        if (failures) s.publish();  // ingress's local picks read health from the snapshot
        on_capacity_change(self);
      },
      [self](const engine_scrape_ptr& scrape) {
        take_peer_messages(self);
        auto& s = self->state;
        const auto now = clock_type::now();
        const bool was_busy = s.router->busy(scrape->worker, now);
        const bool restarted = s.router->on_engine_metrics(scrape->worker, scrape->metrics, now);
        if (restarted || s.router->busy(scrape->worker, now) != was_busy) s.publish();  // local picks avoid busy workers
        on_capacity_change(self);
      },
      [self](queue_check_atom) {
        take_peer_messages(self);
        auto& s = self->state;
        s.check_at.reset();
        const auto now = clock_type::now();
        expire_queue(self, now);
        dispatch(self, now);
        arm_queue_check(self);
        after_booking_steps(self);
      },
      [self](worker_health_atom, std::uint32_t worker, bool up) {
        take_peer_messages(self);
        self->state.router->on_health(worker, up, clock_type::now());
        self->state.publish();
        on_capacity_change(self);
      },
      [self](const router_config_ptr& config) {
        auto& s = self->state;
        s.router->retune(*config);
        s.queue->retune(admission_settings_of(*config));
        s.admission.enabled = queues_when_busy(*config);
        on_capacity_change(self);
      },
      [self](tick_atom) {
        take_peer_messages(self);
        auto& s = self->state;
        const auto now = clock_type::now();
        s.router->tick(now);
        expire_queue(self, now);
        dispatch(self, now);
        after_booking_steps(self);
        publish_own_bookings(self);  // the snapshot round, with replicas
        s.publish();
        self->delayed_send(self, std::chrono::seconds(1), tick_atom_v);
      },
      [self](peer_inbox_atom) { take_peer_messages(self); },
      [self](replica_resync_atom) { publish_own_bookings(self); },
      [self](peer_check_atom) {
        take_peer_messages(self);
        auto& s = self->state;
        const bool peers_dropped = s.router->expire_peers(clock_type::now());
        if (peers_dropped || s.status_stale) {
          s.publish();
          s.published_status(clock_type::now());
        }
        if (peers_dropped) on_capacity_change(self);
        self->delayed_send(self, std::chrono::milliseconds(250), peer_check_atom_v);
      },
      [self](dump_index_atom) {
        take_peer_messages(self);
        return self->state.router->dump_index().dump();
      },
  };
}

}  // namespace

scorer_actor spawn_scorer(caf::actor_system& system, scorer_settings settings) {
  return system.spawn(scorer, std::move(settings));
}

}  // namespace kvr
