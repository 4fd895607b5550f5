#include "actors/scorer.hpp"

#include <chrono>

#include <nlohmann/json.hpp>

#include "core/kv_apply.hpp"
#include "core/prefix_index.hpp"

namespace kvr {
namespace {

struct scorer_state {
  std::unique_ptr<prefix_index> index;
  std::vector<std::string> worker_names;
  std::vector<kv_event_counters> events;  ///< per worker id
  std::uint64_t clears = 0;               ///< clears ordered by the subscriber (restarts, lost history)
};

scorer_actor::behavior_type scorer(scorer_actor::stateful_pointer<scorer_state> self, scorer_settings settings) {
  auto& state = self->state;
  state.index = std::make_unique<prefix_index>(settings.config.block_size, settings.config.max_index_blocks,
                                               std::chrono::seconds(settings.config.approx_ttl_secs));
  state.worker_names = std::move(settings.worker_names);
  state.events.resize(state.worker_names.size());
  return {
      [self](const kv_updates& updates) {
        auto& s = self->state;
        for (const kv_update& update : *updates) {
          if (update.worker >= s.events.size()) continue;  // not a worker of this set
          if (update.clear_first) {
            s.index->apply_cleared(update.worker);
            ++s.clears;
          }
          apply_batch(*s.index, update.worker, update.batch, s.events[update.worker]);
        }
      },
      [self](remove_worker_atom, std::uint32_t worker) { self->state.index->remove_worker(worker); },
      [self](dump_index_atom) {
        auto& s = self->state;
        nlohmann::json dump = kvr::dump_index(*s.index, s.worker_names);
        for (std::size_t w = 0; w < s.events.size(); ++w) dump["workers"][w]["events"] = to_json(s.events[w]);
        dump["subscriber_clears"] = s.clears;
        return dump.dump();
      },
  };
}

}  // namespace

scorer_actor spawn_scorer(caf::actor_system& system, scorer_settings settings) {
  return system.spawn(scorer, std::move(settings));
}

}  // namespace kvr
