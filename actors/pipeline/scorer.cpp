#include "actors/pipeline/scorer.hpp"

#include <optional>

#include <nlohmann/json.hpp>

namespace kvr {
namespace {

using clock_type = std::chrono::steady_clock;

struct scorer_state {
  std::optional<worker_set_router> router;
  std::shared_ptr<scorer_snapshot_cell> snapshot;

  void publish() { snapshot->store(std::make_shared<scorer_snapshot>(router->status(clock_type::now()))); }
};

scorer_actor::behavior_type scorer(scorer_actor::stateful_pointer<scorer_state> self, scorer_settings settings) {
  auto& s = self->state;
  s.router.emplace(std::move(settings.routing));
  s.snapshot = std::move(settings.snapshot);
  s.publish();
  self->delayed_send(self, std::chrono::seconds(1), tick_atom_v);

  return {
      [self](const kv_updates& updates) {
        for (const kv_update& update : *updates)
          self->state.router->on_kv_batch(update.publisher, update.clear_first, update.batch);
      },
      [self](const route_job_ptr& job) {
        const route_job& j = *job;
        const route_query query{.request_id = j.request_id,
                                .sequence_hashes = j.sequence_hashes,
                                .prompt_tokens = j.prompt_tokens > 0 ? j.prompt_tokens : j.request->prompt_tokens,
                                .excluded_workers = j.excluded_workers,
                                .dry_run = j.dry_run};
        job->reply(self->state.router->decide(query, clock_type::now()));
      },
      [self](const lifecycle_event& event) {
        auto& s = self->state;
        s.router->on_lifecycle(event, clock_type::now());
        if (event.what == lifecycle_event::kind::worker_failed) s.publish();
      },
      [self](const lifecycle_batch_ptr& batch) {
        auto& s = self->state;
        const auto now = clock_type::now();
        bool failures = false;
        for (const lifecycle_event& event : *batch) {
          s.router->on_lifecycle(event, now);
          failures |= event.what == lifecycle_event::kind::worker_failed;
        }
        if (failures) s.publish();  // ingress's local picks read health from the snapshot
      },
      [self](worker_health_atom, std::uint32_t worker, bool up) {
        self->state.router->on_health(worker, up, clock_type::now());
        self->state.publish();
      },
      [self](const router_config_ptr& config) { self->state.router->retune(*config); },
      [self](tick_atom) {
        self->state.router->tick(clock_type::now());
        self->state.publish();
        self->delayed_send(self, std::chrono::seconds(1), tick_atom_v);
      },
      [self](dump_index_atom) { return self->state.router->dump_index().dump(); },
  };
}

}  // namespace

scorer_actor spawn_scorer(caf::actor_system& system, scorer_settings settings) {
  return system.spawn(scorer, std::move(settings));
}

}  // namespace kvr
