#include "actors/pipeline/scorer.hpp"

#include <optional>

#include <nlohmann/json.hpp>

#include "actors/replica/replica_hub.hpp"

namespace kvr {
namespace {

using clock_type = std::chrono::steady_clock;
using scorer_pointer = scorer_actor::stateful_pointer<struct scorer_state>;

/// The actor's own part: the routing state is the core's, shared; the queue's timer is its own.
struct scorer_state {
  std::shared_ptr<scorer_core> core;
  std::optional<time_point> check_at;  ///< when the pending queue_check_atom fires
};

/// Wakes the scorer when the queue's oldest request times out.
void arm_queue_check(scorer_pointer self, scorer_core::state& routing) {
  auto& s = self->state;
  const auto due = routing.queue->next_timeout();
  if (!due || (s.check_at && *s.check_at <= *due)) return;
  s.check_at = *due;
  self->delayed_send(self, *due - clock_type::now() + std::chrono::milliseconds(1), queue_check_atom_v);
}

void route(scorer_pointer self, scorer_core::state& s, const route_job_ptr& job) {
  const auto now = clock_type::now();
  // Behind requests already waiting, a new one waits too (dispatch serves it in its turn).
  if (s.queue->empty() || job->dry_run) {
    route_decision decision = s.router->decide(query_of(*job), now);
    if (decision.failure != route_failure::every_worker_busy) return job->reply(std::move(decision));
  }
  if (!s.queue->push(job->request_id, job->priority, now, job)) {
    ++s.admission.rejected_full;
    return job->reply(failed_with(route_failure::queue_full));
  }
  s.publish_depth();
  s.dispatch(now);
  arm_queue_check(self, s);
}

/// Hands this replica's bookings in flight to the peers (after the steps shared before).
void publish_own_bookings(scorer_pointer self, scorer_core::state& s) {
  if (s.replicas) s.replicas->share_snapshot(s.set_name, self->address(), s.router->own_bookings());
}

scorer_actor::behavior_type scorer(scorer_pointer self, std::shared_ptr<scorer_core> core) {
  self->state.core = core;
  self->attach_functor([core] { core->retire(); });
  {
    auto s = core->hold();
    if (s->replicas) {
      s->replicas->attach(s->set_name, self->address(), s->inbox);
      self->attach_functor([replicas = s->replicas, name = s->set_name, me = self->address()] { replicas->detach(name, me); });
      self->delayed_send(self, std::chrono::milliseconds(250), peer_check_atom_v);
    }
    s->publish();
    s->publish_depth();
  }
  self->delayed_send(self, std::chrono::seconds(1), tick_atom_v);

  // Every handler holds the routing state; holding it applies the lifecycle steps left for it
  // first. Handlers that read routing state take the peers' messages next, so what arrived
  // before a decision counts in it.
  return {
      [self](const kv_updates& updates) {
        auto s = self->state.core->hold();
        const auto now = clock_type::now();
        for (const kv_update& update : *updates) s->router->on_kv_batch(update.publisher, update.clear_first, update.batch, now);
      },
      [self](const route_job_ptr& job) {
        auto s = self->state.core->hold();
        s->take_peer_messages();
        route(self, *s, job);
        s->after_booking_steps();
      },
      [self](withdraw_atom, std::uint64_t request_id) {
        auto s = self->state.core->hold();
        if (auto job = s->queue->remove(request_id)) {
          ++s->admission.withdrawn;
          s->publish_depth();
          (*job)->reply(failed_with(route_failure::queue_timeout));  // nobody reads it: the client is gone
        }
      },
      [self](steps_waiting_atom) { self->state.core->apply_waiting_steps(); },
      [self](const lifecycle_batch_ptr& batch) {
        auto s = self->state.core->hold();
        s->take_peer_messages();
        s->apply_steps(*batch);
      },
      [self](const engine_scrape_ptr& scrape) {
        auto s = self->state.core->hold();
        s->take_peer_messages();
        const auto now = clock_type::now();
        const bool was_busy = s->router->busy(scrape->worker, now);
        const bool restarted = s->router->on_engine_metrics(scrape->worker, scrape->metrics, now);
        if (restarted || s->router->busy(scrape->worker, now) != was_busy) s->publish();  // local picks avoid busy workers
        s->on_capacity_change();
      },
      [self](queue_check_atom) {
        auto s = self->state.core->hold();
        s->take_peer_messages();
        self->state.check_at.reset();
        const auto now = clock_type::now();
        s->expire_queue(now);
        s->dispatch(now);
        arm_queue_check(self, *s);
        s->after_booking_steps();
      },
      [self](worker_health_atom, std::uint32_t worker, bool up) {
        auto s = self->state.core->hold();
        s->take_peer_messages();
        s->router->on_health(worker, up, clock_type::now());
        s->publish();
        s->on_capacity_change();
      },
      [self](const router_config_ptr& config) {
        auto s = self->state.core->hold();
        s->router->retune(*config);
        s->queue->retune(admission_settings_of(*config));
        s->admission.enabled = queues_when_busy(*config);
        s->on_capacity_change();
      },
      [self](tick_atom) {
        auto s = self->state.core->hold();
        s->take_peer_messages();
        const auto now = clock_type::now();
        s->router->tick(now);
        s->expire_queue(now);
        s->dispatch(now);
        s->after_booking_steps();
        publish_own_bookings(self, *s);  // the snapshot round, with replicas
        s->publish();
        self->delayed_send(self, std::chrono::seconds(1), tick_atom_v);
      },
      [self](peer_inbox_atom) { self->state.core->hold()->take_peer_messages(); },
      [self](replica_resync_atom) { publish_own_bookings(self, *self->state.core->hold()); },
      [self](peer_check_atom) {
        auto s = self->state.core->hold();
        s->take_peer_messages();
        const bool peers_dropped = s->router->expire_peers(clock_type::now());
        if (peers_dropped || s->status_stale) {
          s->publish();
          s->published_status(clock_type::now());
        }
        if (peers_dropped) s->on_capacity_change();
        self->delayed_send(self, std::chrono::milliseconds(250), peer_check_atom_v);
      },
      [self](dump_index_atom) {
        auto s = self->state.core->hold();
        s->take_peer_messages();
        return s->router->dump_index().dump();
      },
  };
}

}  // namespace

scorer_handle spawn_scorer(caf::actor_system& system, scorer_settings settings) {
  auto core = std::make_shared<scorer_core>(std::move(settings.routing), std::move(settings.snapshot),
                                            std::move(settings.replicas), std::move(settings.set_name));
  scorer_actor actor = system.spawn(scorer, core);
  core->hold()->scorer = actor->address();
  return {std::move(actor), std::move(core)};
}

}  // namespace kvr
