#include "actors/pipeline/scorer.hpp"

#include <optional>

#include <nlohmann/json.hpp>

#include "core/routing/active_sequences.hpp"
#include "core/kv/block_hash.hpp"
#include "core/kv/kv_apply.hpp"
#include "core/routing/prefix_index.hpp"
#include "core/routing/selector/candidates.hpp"
#include "core/routing/selector/selector.hpp"

namespace kvr {
namespace {

using clock_type = std::chrono::steady_clock;

struct scorer_state {
  scorer_settings settings;
  std::unique_ptr<prefix_index> index;
  std::unique_ptr<active_sequences> active;
  selector_rng rng{0};
  std::uint64_t round_robin_ticket = 0;
  std::vector<kv_event_counters> events;              ///< per publisher
  std::vector<clock_type::time_point> unhealthy_until;  ///< per worker: passive back-off after a failure
  std::vector<std::optional<clock_type::time_point>> down_since;  ///< per worker: the health checker's "down"
  std::vector<std::uint8_t> index_dropped;            ///< per worker: entries dropped after the grace period
  std::vector<std::uint64_t> routed, failures;        ///< per worker
  std::uint64_t routed_total = 0, dry_runs = 0, unroutable = 0, clears = 0;
  // Reused per request.
  std::vector<std::uint32_t> publisher_overlaps, worker_overlaps;
  std::vector<worker_candidate> candidates;
  std::vector<std::uint8_t> healthy_scratch;
  std::vector<std::uint32_t> active_overlaps;  ///< per worker: prompt blocks its in-flight requests hold (scratch)

  [[nodiscard]] std::size_t workers() const { return settings.worker_names.size(); }
  [[nodiscard]] bool healthy(std::uint32_t w, clock_type::time_point now) const {
    return !down_since[w] && now >= unhealthy_until[w];
  }
};

void publish_snapshot(scorer_state& s) {
  auto snapshot = std::make_shared<scorer_snapshot>();
  const auto now = clock_type::now();
  std::vector<std::uint64_t> blocks_per_worker(s.workers(), 0);
  for (std::uint32_t p = 0; p < s.settings.publisher_worker.size(); ++p)
    blocks_per_worker[s.settings.publisher_worker[p]] += s.index->worker_blocks(p);
  for (std::uint32_t w = 0; w < s.workers(); ++w) {
    const worker_load load = s.active->load(w);
    snapshot->workers.push_back({.name = s.settings.worker_names[w],
                                 .healthy = s.healthy(w, now),
                                 .prefill_tokens = load.prefill_tokens,
                                 .decode_blocks = load.decode_blocks,
                                 .requests = load.requests,
                                 .index_blocks = blocks_per_worker[w],
                                 .routed = s.routed[w],
                                 .failures = s.failures[w]});
  }
  snapshot->routed = s.routed_total;
  snapshot->dry_runs = s.dry_runs;
  snapshot->unroutable = s.unroutable;
  snapshot->expired_bookings = s.active->counters().expired;
  snapshot->index_blocks = s.index->total_blocks();
  for (const auto& e : s.events) snapshot->kv_batches += e.batches;
  s.settings.snapshot->store(std::move(snapshot));
}

route_decision decide(scorer_state& s, route_job& job) {
  const router_config& config = s.settings.config;
  const auto now = clock_type::now();
  if (!job.sequence_hashes.empty()) s.index->find_matches(job.sequence_hashes, s.publisher_overlaps);
  else s.publisher_overlaps.clear();
  overlaps_by_worker(s.publisher_overlaps, s.settings.publisher_worker, s.workers(), s.worker_overlaps);

  std::vector<std::uint8_t>& healthy = s.healthy_scratch;
  healthy.resize(s.workers());
  for (std::uint32_t w = 0; w < s.workers(); ++w) healthy[w] = s.healthy(w, now) ? 1 : 0;
  // Blocks of this prompt each worker already holds for its in-flight requests: shared, not
  // added (decode load), and in its cache even if their KV events have not arrived yet (a
  // group's second request often comes before the first one's BlockStored).
  s.active_overlaps.assign(s.workers(), 0);
  if (!job.sequence_hashes.empty()) {
    for (std::uint32_t w = 0; w < s.workers(); ++w) {
      s.active_overlaps[w] = s.active->active_prefix_blocks(w, job.sequence_hashes);
      s.worker_overlaps[w] = std::max(s.worker_overlaps[w], s.active_overlaps[w]);
    }
  }
  collect_candidates(s.worker_overlaps, s.active->loads(), healthy, job.excluded_workers, s.candidates, s.active_overlaps);

  route_decision decision;
  const std::uint32_t prompt_tokens = job.prompt_tokens > 0 ? job.prompt_tokens : job.request->prompt_tokens;
  decision.prompt_tokens = prompt_tokens;
  decision.prompt_blocks = (prompt_tokens + config.block_size - 1) / config.block_size;
  auto chosen = select_worker(s.candidates, config, {prompt_tokens, s.round_robin_ticket}, s.rng);
  if (!chosen) {
    ++s.unroutable;
    decision.error = api_errc::no_worker_available;
    decision.error_message = job.excluded_workers.empty() ? "no healthy worker is available for this model"
                                                          : "every available worker failed this request";
    if (!job.excluded_workers.empty()) decision.error = api_errc::worker_failed;
    return decision;
  }
  ++s.round_robin_ticket;
  decision.ok = true;
  decision.worker = chosen->worker;
  decision.cost = chosen->cost;
  decision.overlap_blocks = s.worker_overlaps[chosen->worker];
  if (job.dry_run) {
    ++s.dry_runs;
    for (std::uint32_t w = 0; w < s.workers(); ++w) {
      const worker_load load = s.active->load(w);
      decision.candidates.push_back({w, s.worker_overlaps[w], load.prefill_tokens, load.decode_blocks, healthy[w] != 0});
    }
    return decision;
  }
  s.active->book({job.request_id, chosen->worker, prompt_tokens, decision.overlap_blocks}, now, job.sequence_hashes);
  ++s.routed[chosen->worker];
  ++s.routed_total;
  // Approximate mode: the chosen worker will cache this prompt.
  if (uses_prefix_overlap(config) && !config.use_kv_events && !job.sequence_hashes.empty())
    s.index->insert_predicted(chosen->worker, job.sequence_hashes, now);
  return decision;
}

/// The request failed on `worker` before any answer: release it and keep the worker out for
/// the back-off period.
void worker_failed(scorer_state& s, std::uint64_t id, std::uint32_t worker) {
  s.active->release(id);
  if (worker >= s.workers()) return;
  s.unhealthy_until[worker] = clock_type::now() + s.settings.unhealthy_backoff;
  ++s.failures[worker];
  publish_snapshot(s);
}

scorer_actor::behavior_type scorer(scorer_actor::stateful_pointer<scorer_state> self, scorer_settings settings) {
  auto& s = self->state;
  s.settings = std::move(settings);
  if (s.settings.publisher_worker.empty())
    for (std::uint32_t w = 0; w < s.workers(); ++w) s.settings.publisher_worker.push_back(w);
  if (s.settings.publisher_names.empty())
    for (std::uint32_t p : s.settings.publisher_worker) s.settings.publisher_names.push_back(s.settings.worker_names[p]);
  const router_config& config = s.settings.config;
  s.index = std::make_unique<prefix_index>(config.block_size, config.max_index_blocks, std::chrono::seconds(config.approx_ttl_secs));
  s.active = std::make_unique<active_sequences>(config.block_size, config.track_active_blocks, s.settings.max_request_age);
  s.rng.seed(s.settings.seed);
  s.events.resize(s.settings.publisher_worker.size());
  s.unhealthy_until.assign(s.workers(), clock_type::time_point{});
  s.down_since.assign(s.workers(), std::nullopt);
  s.index_dropped.assign(s.workers(), 0);
  s.routed.assign(s.workers(), 0);
  s.failures.assign(s.workers(), 0);
  publish_snapshot(s);
  self->delayed_send(self, std::chrono::seconds(1), tick_atom_v);

  return {
      [self](const kv_updates& updates) {
        auto& s = self->state;
        for (const kv_update& update : *updates) {
          if (update.worker >= s.events.size()) continue;  // not a publisher of this set
          if (update.clear_first) {
            s.index->apply_cleared(update.worker);
            ++s.clears;
          }
          apply_batch(*s.index, update.worker, update.batch, s.events[update.worker]);
        }
      },
      [self](const route_job_ptr& job) { job->reply(decide(self->state, *job)); },
      [self](first_token_atom, std::uint64_t id) { self->state.active->first_token(id); },
      [self](finished_atom, std::uint64_t id) { self->state.active->release(id); },
      [self](worker_failed_atom, std::uint64_t id, std::uint32_t worker) { worker_failed(self->state, id, worker); },
      [self](const lifecycle_batch_ptr& batch) {
        auto& s = self->state;
        const auto now = clock_type::now();
        for (const lifecycle_event& e : *batch) switch (e.what) {
            case lifecycle_event::kind::booked:
              if (e.worker >= s.workers()) break;
              s.active->book({e.request_id, e.worker, e.prompt_tokens, 0}, now, {});
              ++s.routed[e.worker];
              ++s.routed_total;
              break;
            case lifecycle_event::kind::first_token: s.active->first_token(e.request_id); break;
            case lifecycle_event::kind::finished: s.active->release(e.request_id); break;
            case lifecycle_event::kind::worker_failed: worker_failed(s, e.request_id, e.worker); break;
          }
      },
      [self](worker_health_atom, std::uint32_t worker, bool up) {
        auto& s = self->state;
        if (worker >= s.workers()) return;
        if (up) {
          s.down_since[worker].reset();
          s.index_dropped[worker] = 0;
        } else if (!s.down_since[worker]) {
          s.down_since[worker] = clock_type::now();
        }
        publish_snapshot(s);
      },
      [self](tick_atom) {
        auto& s = self->state;
        const auto now = clock_type::now();
        s.active->expire(now);
        s.index->expire(now);
        for (std::uint32_t w = 0; w < s.workers(); ++w)
          if (s.down_since[w] && !s.index_dropped[w] && now - *s.down_since[w] >= s.settings.index_grace) {
            for (std::uint32_t p = 0; p < s.settings.publisher_worker.size(); ++p)
              if (s.settings.publisher_worker[p] == w) s.index->remove_worker(p);
            s.index_dropped[w] = 1;
          }
        publish_snapshot(s);
        self->delayed_send(self, std::chrono::seconds(1), tick_atom_v);
      },
      [self](remove_worker_atom, std::uint32_t publisher) { self->state.index->remove_worker(publisher); },
      [self](dump_index_atom) {
        auto& s = self->state;
        nlohmann::json dump = kvr::dump_index(*s.index, s.settings.publisher_names);
        for (std::size_t p = 0; p < s.events.size(); ++p) dump["workers"][p]["events"] = to_json(s.events[p]);
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
