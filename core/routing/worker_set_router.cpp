#include "core/routing/worker_set_router.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/routing/selector/candidates.hpp"

namespace kvr {

worker_set_router::worker_set_router(worker_set_router_settings settings) : settings_(std::move(settings)) {
  if (settings_.publisher_worker.empty())
    for (std::uint32_t w = 0; w < workers(); ++w) settings_.publisher_worker.push_back(w);
  if (settings_.publisher_names.empty())
    for (std::uint32_t w : settings_.publisher_worker)
      settings_.publisher_names.push_back(w < workers() ? settings_.worker_names[w] : std::string("?"));
  const router_config& config = settings_.config;
  index_ = std::make_unique<prefix_index>(config.block_size, config.max_index_blocks,
                                          std::chrono::seconds(config.approx_ttl_secs));
  groups_ = std::make_unique<kv_groups>(config.block_size, config.max_index_blocks);
  tiers_ = std::make_unique<kv_tiers>(config.block_size, config.max_lower_tier_blocks,
                                      std::chrono::seconds(config.lower_tier_ttl_secs));
  active_ = std::make_unique<active_sequences>(config.block_size, config.track_active_blocks, settings_.max_request_age);
  if (settings_.share_bookings)
    remote_.emplace(settings_.worker_names, remote_bookings_settings{.block_size = config.block_size,
                                                                     .track_active_blocks = config.track_active_blocks,
                                                                     .peer_timeout = settings_.peer_timeout,
                                                                     .max_request_age = settings_.max_request_age});
  rng_.seed(settings_.seed);
  decode_config_ = config;
  if (settings_.disaggregation) decode_config_.overlap_score_credit = settings_.disaggregation->decode_overlap_credit;
  workers_.assign(workers(), {});
  capacity_.resize(workers());
  publishers_of_.assign(workers(), {});
  for (std::uint32_t p = 0; p < settings_.publisher_worker.size(); ++p)
    if (const std::uint32_t w = settings_.publisher_worker[p]; w < workers()) publishers_of_[w].push_back(p);
  events_.resize(settings_.publisher_worker.size());
  last_batch_.resize(settings_.publisher_worker.size());
}

bool worker_set_router::healthy(std::uint32_t worker, time_point now) const {
  return worker < workers_.size() && !workers_[worker].down_since && now >= workers_[worker].unhealthy_until;
}

bool worker_set_router::busy(std::uint32_t worker, time_point now) const {
  if (worker >= workers_.size()) return false;
  const worker_state& w = workers_[worker];
  const bool engine_fresh = now < w.engine_until;
  const router_config& config = settings_.config;
  // kv mode prices an engine's queue in its cost; the load-only modes have no cost to price it
  // in, so there a queue is obeyed.
  const bool obeys_engine_queue = config.mode != router_mode::kv || config.engine_waiting_busy;
  if (obeys_engine_queue && engine_fresh && w.engine.waiting_requests.value_or(0) > 0) return true;
  if (!queues_when_busy(config)) return false;
  const std::uint32_t batch = engine_fresh && w.engine.max_num_batched_tokens ? *w.engine.max_num_batched_tokens
                                                                            : config.max_num_batched_tokens;
  return static_cast<double>(booked_load(worker).prefill_tokens) > config.busy_threshold * batch;
}

worker_load worker_set_router::booked_load(std::uint32_t worker) const {
  worker_load total = active_->load(worker);
  if (remote_ && !remote_->empty()) total += remote_->load(worker);
  return total;
}

bool worker_set_router::on_engine_metrics(std::uint32_t worker, const engine_metrics& metrics, time_point now) {
  if (worker >= workers_.size()) return false;
  worker_state& w = workers_[worker];
  w.engine = metrics;
  // Judged as the scrape comes, against the bookings then: by the time a request is routed on a
  // scrape seconds old, many of the requests it saw waiting have started, and measured against
  // the bookings of that later moment they read as a queue nobody sent (at 700 requests/s the
  // cost then priced a phantom queue on every worker).
  w.engine_unexplained_waiting =
      std::max(0.0, metrics.waiting_requests.value_or(0) - static_cast<double>(booked_load(worker).awaiting_first_token));
  if (metrics.num_gpu_blocks) capacity_.set_reported(worker, *metrics.num_gpu_blocks, static_cast<std::uint32_t>(publishers_of_[worker].size()));
  w.engine_until = now + settings_.engine_metrics_ttl;
  const bool restarted = engine_restarted(w.engine_start, metrics.start_time);
  if (metrics.start_time) w.engine_start = metrics.start_time;
  if (!restarted) return false;
  ++w.engine_restarts;
  for (std::uint32_t p = 0; p < settings_.publisher_worker.size(); ++p)
    if (settings_.publisher_worker[p] == worker) forget_publisher(p);
  return true;
}

void worker_set_router::compute_overlaps(std::span<const std::uint64_t> sequence_hashes) {
  if (!sequence_hashes.empty()) {
    index_->find_matches(sequence_hashes, publisher_overlaps_);
    groups_->limit_overlaps(sequence_hashes, publisher_overlaps_);  // a hybrid model's other groups
  } else {
    publisher_overlaps_.clear();
  }
  overlaps_by_worker(publisher_overlaps_, settings_.publisher_worker, workers(), worker_overlaps_);
  // Where the GPU chain ends, what the lower tiers hold next, at their weights (per worker, its
  // best rank's).
  worker_tier_credit_.assign(workers(), 0.0);
  if (!tiers_->empty() && !sequence_hashes.empty())
    for (std::uint32_t p = 0; p < settings_.publisher_worker.size(); ++p)  // the index may not know p: no GPU blocks
      if (const std::uint32_t w = settings_.publisher_worker[p]; w < workers()) {
        const std::uint32_t gpu_blocks = p < publisher_overlaps_.size() ? publisher_overlaps_[p] : 0;
        worker_tier_credit_[w] =
            std::max(worker_tier_credit_[w], tiers_->credit(p, sequence_hashes, gpu_blocks, settings_.config.tier_weights));
      }
  // Blocks of this prompt each worker already holds for its in-flight requests: shared, not
  // added (decode load), and in its cache even if their KV events have not arrived yet (a
  // group's second request often comes before the first one's BlockStored).
  active_overlaps_.assign(workers(), 0);
  if (sequence_hashes.empty()) return;
  const bool peers = remote_ && !remote_->empty();
  for (std::uint32_t w = 0; w < workers(); ++w) {
    active_overlaps_[w] = active_->active_prefix_blocks(w, sequence_hashes);
    if (peers) active_overlaps_[w] = std::max(active_overlaps_[w], remote_->active_prefix_blocks(w, sequence_hashes));
    worker_overlaps_[w] = std::max(worker_overlaps_[w], active_overlaps_[w]);
  }
}

bool worker_set_router::keep_free_workers_only(const route_query& query, time_point now) {
  auto excluded = [&](std::uint32_t w) {
    return std::find(query.excluded_workers.begin(), query.excluded_workers.end(), w) != query.excluded_workers.end();
  };
  bool any_routable = false, any_free = false;
  busy_.assign(workers(), 0);
  for (std::uint32_t w = 0; w < workers(); ++w) {
    if (!healthy_[w] || excluded(w)) continue;
    any_routable = true;
    busy_[w] = busy(w, now) ? 1 : 0;
    any_free |= busy_[w] == 0;
  }
  if (any_free) {
    for (std::uint32_t w = 0; w < workers(); ++w)
      if (busy_[w]) healthy_[w] = 0;
    return false;
  }
  return any_routable && queues_when_busy(settings_.config);
}

/// A session's next turn stays on its bound worker while that worker is routable (healthy, not
/// busy, not failed by this request) and, where the mode compares costs, within
/// `session_affinity_slack` blocks of the best.
void worker_set_router::keep_session_worker(const route_query& query, time_point now, selection& chosen) {
  const auto bound = sessions_.find(query.session, now);
  if (!bound || *bound == chosen.worker) return;
  const router_config& config = settings_.config;
  const auto it = std::find_if(candidates_.begin(), candidates_.end(), [&](const worker_candidate& c) { return c.worker == *bound; });
  if (it == candidates_.end()) return;  // not routable now: the conversation moves
  const auto bound_cost = comparable_cost(*it, config, query.prompt_tokens);
  if (bound_cost) {
    double best = *bound_cost;
    for (const worker_candidate& c : candidates_) best = std::min(best, *comparable_cost(c, config, query.prompt_tokens));
    if (*bound_cost - best > config.session_affinity_slack) return;
    chosen.cost = *bound_cost;
  }
  chosen.candidate = static_cast<std::size_t>(it - candidates_.begin());
  chosen.worker = *bound;
}

void worker_set_router::mark_routable(pool from, time_point now) {
  healthy_.resize(workers());
  for (std::uint32_t w = 0; w < workers(); ++w) {
    const worker_role role = w < settings_.worker_roles.size() ? settings_.worker_roles[w] : worker_role::both;
    const bool in_pool = from == pool::any || (from == pool::prefill ? prefills(role) : decodes(role));
    healthy_[w] = in_pool && healthy(w, now) ? 1 : 0;
  }
}

double worker_set_router::unexplained_engine_queue(std::uint32_t worker, time_point now) const {
  const worker_state& w = workers_[worker];
  return now < w.engine_until ? w.engine_unexplained_waiting : 0.0;
}

std::optional<selection> worker_set_router::pick(const route_query& query, const router_config& config,
                                                 std::span<const worker_load> loads, time_point now) {
  collect_candidates(worker_overlaps_, loads, healthy_, query.excluded_workers, candidates_, active_overlaps_);
  if (config.mode == router_mode::kv && config.engine_queue_weight > 0)
    for (worker_candidate& c : candidates_) c.engine_queued_requests = unexplained_engine_queue(c.worker, now);
  if (config.eviction_weight > 0 && uses_prefix_overlap(config))
    for (worker_candidate& c : candidates_) c.evicted_blocks = evicted_blocks(c.worker, c.overlap_blocks, query.sequence_hashes.size());
  for (worker_candidate& c : candidates_)
    if (c.worker < worker_tier_credit_.size()) c.lower_tier_blocks = worker_tier_credit_[c.worker];
  return select_worker(candidates_, config, {query.prompt_tokens, round_robin_ticket_}, rng_);
}

route_decision worker_set_router::decide(const route_query& query, time_point now) {
  const router_config& config = settings_.config;
  route_decision decision;
  decision.prompt_tokens = query.prompt_tokens;
  decision.prompt_blocks = (query.prompt_tokens + config.block_size - 1) / config.block_size;
  // The pick that may wait in the queue: the request's only worker, or its prefill worker.
  const bool pair = settings_.disaggregation && query.disaggregate;
  mark_routable(!settings_.disaggregation ? pool::any : pair ? pool::prefill : pool::decode, now);
  if (keep_free_workers_only(query, now) && !query.dry_run) {
    decision.failure = route_failure::every_worker_busy;
    return decision;
  }
  compute_overlaps(query.sequence_hashes);
  std::span<const worker_load> loads = active_->loads();
  if (remote_ && !remote_->empty()) {
    total_loads_.assign(loads.begin(), loads.end());
    remote_->add_loads(total_loads_);
    loads = total_loads_;
  }
  auto chosen = pick(query, config, loads, now);
  if (chosen && query.session != 0 && config.session_affinity_ttl_secs > 0) keep_session_worker(query, now, *chosen);
  if (!chosen) {
    ++unroutable_;
    decision.failure = query.excluded_workers.empty() ? route_failure::no_healthy_worker : route_failure::every_worker_failed;
    return decision;
  }
  decision.failure = route_failure::none;
  decision.worker = chosen->worker;
  decision.cost = chosen->cost;
  decision.overlap_blocks = worker_overlaps_[chosen->worker];
  if (pair) {
    mark_routable(pool::decode, now);
    const auto decode = pick(query, decode_config_, loads, now);
    if (!decode) {
      ++unroutable_;
      decision.failure = route_failure::no_decode_worker;
      return decision;
    }
    const std::uint32_t decode_cached = worker_overlaps_[decode->worker];
    const std::uint64_t uncached_on_decode =
        query.prompt_tokens - std::min<std::uint64_t>(query.prompt_tokens, std::uint64_t{decode_cached} * config.block_size);
    decision.local_prefill = settings_.disaggregation->max_local_prefill_tokens > 0 &&
                             uncached_on_decode < settings_.disaggregation->max_local_prefill_tokens;
    if (!decision.local_prefill) {
      decision.prefill_worker = chosen->worker;
      decision.prefill_overlap_blocks = decision.overlap_blocks;
    }
    decision.worker = decode->worker;
    decision.overlap_blocks = decode_cached;
  }
  ++round_robin_ticket_;
  if (query.dry_run) {
    fill_dry_run(decision, now, query.sequence_hashes.size());
    return decision;
  }
  commit(query, decision, now);
  return decision;
}

void worker_set_router::fill_dry_run(route_decision& decision, time_point now, std::uint64_t prompt_blocks) {
  ++dry_runs_;
  for (std::uint32_t w = 0; w < workers(); ++w) {
    const worker_load load = booked_load(w);
    const worker_load remote = remote_ ? remote_->load(w) : worker_load{};
    const std::uint64_t resident = resident_blocks(w);
    const auto candidate = std::find_if(candidates_.begin(), candidates_.end(), [w](const worker_candidate& c) { return c.worker == w; });
    decision.candidates.push_back(
        {.worker = w,
         .overlap_blocks = worker_overlaps_[w],
         .active_prefill_tokens = load.prefill_tokens,
         .active_decode_blocks = load.decode_blocks,
         .remote_prefill_tokens = remote.prefill_tokens,
         .remote_decode_blocks = remote.decode_blocks,
         .cached_blocks = resident,
         .cache_capacity_blocks = capacity_.capacity(w),
         .evicted_blocks = evicted_blocks(w, worker_overlaps_[w], prompt_blocks),
         .engine_queued_requests = unexplained_engine_queue(w, now),
         .cost = candidate == candidates_.end() ? std::nullopt : comparable_cost(*candidate, settings_.config, decision.prompt_tokens),
         .healthy = healthy(w, now),
         .busy = w < busy_.size() && busy_[w] != 0});
  }
}

void worker_set_router::commit(const route_query& query, route_decision& decision, time_point now) {
  const router_config& config = settings_.config;
  // The worker whose cache the prompt lands in first: the prefill worker, else the only one.
  const std::uint32_t computes = decision.prefill_worker.value_or(decision.worker);
  if (decision.prefill_worker) {
    book({prefill_leg_id(query.request_id), *decision.prefill_worker, query.prompt_tokens, decision.prefill_overlap_blocks},
         now, query.sequence_hashes);
    book({query.request_id, decision.worker, query.prompt_tokens, decision.overlap_blocks}, now, query.sequence_hashes);
    // The decode worker pulls the prompt's KV: no prefill work, only its blocks.
    if (active_->first_token(query.request_id)) share({.what = peer_event::kind::first_token, .request_id = query.request_id});
  } else {
    book({query.request_id, decision.worker, query.prompt_tokens, decision.overlap_blocks}, now, query.sequence_hashes);
  }
  if (query.session != 0 && config.session_affinity_ttl_secs > 0)
    sessions_.bind(query.session, computes, now + std::chrono::seconds(config.session_affinity_ttl_secs));
  if (uses_prefix_overlap(config)) {
    prompt_blocks_routed_ += query.sequence_hashes.size();
    overlap_blocks_routed_ += decision.prefill_worker ? decision.prefill_overlap_blocks : decision.overlap_blocks;
  }
  // Approximate mode: the chosen workers will cache this prompt (publisher ids are worker ids);
  // a decode worker holds what it pulled.
  if (uses_prefix_overlap(config) && !config.use_kv_events && !query.sequence_hashes.empty()) {
    index_->insert_predicted(decision.worker, query.sequence_hashes, now);
    if (decision.prefill_worker) index_->insert_predicted(*decision.prefill_worker, query.sequence_hashes, now);
  }
}

void worker_set_router::book(const booking& request, time_point now, std::span<const std::uint64_t> sequence_hashes) {
  if (request.worker >= workers()) return;
  if (!active_->book(request, now, sequence_hashes)) return;  // already in flight: counted once
  ++workers_[request.worker].routed;
  ++routed_total_;
  if (settings_.share_bookings) {
    peer_event event{.what = peer_event::kind::booked,
                     .request_id = request.request_id,
                     .worker = settings_.worker_names[request.worker],
                     .prompt_tokens = request.prompt_tokens,
                     .overlap_blocks = request.overlap_blocks};
    if (peers_need_hashes()) event.sequence_hashes.assign(sequence_hashes.begin(), sequence_hashes.end());
    share(std::move(event));
  }
}

bool worker_set_router::peers_need_hashes() const {
  const router_config& config = settings_.config;
  return config.track_active_blocks || (uses_prefix_overlap(config) && !config.use_kv_events);
}

void worker_set_router::share(peer_event event) {
  if (settings_.share_bookings) outbox_.push_back(std::move(event));
}

void worker_set_router::on_peer_message(const peer_bookings_message& message, time_point now) {
  if (!remote_) return;
  const bool predicts = uses_prefix_overlap(settings_.config) && !settings_.config.use_kv_events;
  remote_->apply(message, now, [&](worker_id worker, const peer_event& event) {
    if (predicts && !event.sequence_hashes.empty()) index_->insert_predicted(worker, event.sequence_hashes, now);
  });
}

void worker_set_router::on_peer_message(const peer_snapshot_message& message, time_point now) {
  if (remote_) remote_->apply(message, now);
}

std::vector<peer_snapshot_entry> worker_set_router::own_bookings() const {
  std::vector<peer_snapshot_entry> out;
  out.reserve(active_->in_flight());
  active_->for_each_booking([&](const active_sequences::in_flight_booking& b) {
    if (b.request.worker >= workers()) return;
    out.push_back({.request_id = b.request.request_id,
                   .worker = settings_.worker_names[b.request.worker],
                   .prompt_tokens = b.request.prompt_tokens,
                   .overlap_blocks = b.request.overlap_blocks,
                   .prefilled = b.prefilled});
  });
  return out;
}

void worker_set_router::worker_failed(std::uint64_t request_id, std::uint32_t worker, time_point now) {
  if (active_->release(request_id)) share({.what = peer_event::kind::finished, .request_id = request_id});
  if (worker >= workers()) return;
  workers_[worker].unhealthy_until = now + settings_.unhealthy_backoff;
  ++workers_[worker].failures;
}

void worker_set_router::on_lifecycle(const lifecycle_event& event, time_point now) {
  switch (event.what) {
    case lifecycle_event::kind::booked: return book({event.request_id, event.worker, event.prompt_tokens, 0}, now, {});
    case lifecycle_event::kind::first_token:
      if (active_->first_token(event.request_id)) share({.what = peer_event::kind::first_token, .request_id = event.request_id});
      return;
    case lifecycle_event::kind::finished:
      if (active_->release(event.request_id)) share({.what = peer_event::kind::finished, .request_id = event.request_id});
      return;
    case lifecycle_event::kind::worker_failed: return worker_failed(event.request_id, event.worker, now);
  }
}

void worker_set_router::retune(const router_config& config) {
  if (!retunable_in_place(settings_.config, config)) return;
  settings_.config = config;
  tiers_->set_ttl(std::chrono::seconds(config.lower_tier_ttl_secs));
  decode_config_ = config;
  if (settings_.disaggregation) decode_config_.overlap_score_credit = settings_.disaggregation->decode_overlap_credit;
}

void worker_set_router::on_health(std::uint32_t worker, bool up, time_point now) {
  if (worker >= workers()) return;
  worker_state& w = workers_[worker];
  if (up) {
    w.down_since.reset();
    w.index_dropped = false;
  } else if (!w.down_since) {
    w.down_since = now;
  }
}

void worker_set_router::on_kv_batch(std::uint32_t publisher, bool clear_first, const kv_batch& batch, time_point now) {
  if (publisher >= events_.size()) return;  // not a publisher of this set
  last_batch_[publisher] = now;
  if (clear_first) {
    index_->apply_cleared(publisher);
    groups_->clear(publisher);
    tiers_->clear(publisher);
    ++clears_;
  }
  apply_batch(*index_, publisher, batch, events_[publisher], groups_.get(), tiers_.get(), now);
  if (const std::uint32_t w = settings_.publisher_worker[publisher]; w < workers())
    capacity_.observe(w, resident_blocks(w), removed_events(w));
}

std::uint64_t worker_set_router::evicted_blocks(std::uint32_t worker, std::uint32_t overlap, std::uint64_t prompt_blocks) const {
  return capacity_.evicted_by(worker, resident_blocks(worker), prompt_blocks - std::min<std::uint64_t>(overlap, prompt_blocks));
}

std::uint64_t worker_set_router::resident_blocks(std::uint32_t worker) const {
  std::uint64_t blocks = 0;
  if (worker < publishers_of_.size())
    for (std::uint32_t p : publishers_of_[worker]) blocks += index_->worker_blocks(p);
  return blocks;
}

std::uint64_t worker_set_router::removed_events(std::uint32_t worker) const {
  std::uint64_t removed = 0;
  if (worker < publishers_of_.size())
    for (std::uint32_t p : publishers_of_[worker]) removed += events_[p].removed_events;
  return removed;
}

void worker_set_router::remove_publisher(std::uint32_t publisher) { forget_publisher(publisher); }

void worker_set_router::forget_publisher(std::uint32_t publisher) {
  index_->remove_worker(publisher);
  groups_->clear(publisher);
  tiers_->clear(publisher);
}

void worker_set_router::tick(time_point now) {
  active_->expire(now);  // peers learn of these from the next snapshot
  if (remote_) remote_->expire(now);
  index_->expire(now);
  tiers_->expire(now);
  for (std::uint32_t w = 0; w < workers(); ++w) {
    worker_state& state = workers_[w];
    if (!state.down_since || state.index_dropped || now - *state.down_since < settings_.index_grace) continue;
    for (std::uint32_t p = 0; p < settings_.publisher_worker.size(); ++p)
      if (settings_.publisher_worker[p] == w) forget_publisher(p);
    state.index_dropped = true;
  }
}

worker_set_status worker_set_router::status(time_point now) const {
  worker_set_status status;
  std::vector<std::uint64_t> blocks_per_worker(workers(), 0);
  std::vector<std::optional<time_point>> latest_batch(workers());
  for (std::uint32_t p = 0; p < settings_.publisher_worker.size(); ++p) {
    const std::uint32_t w = settings_.publisher_worker[p];
    if (w >= workers()) continue;
    blocks_per_worker[w] += index_->worker_blocks(p);
    if (last_batch_[p] && (!latest_batch[w] || *latest_batch[w] < *last_batch_[p])) latest_batch[w] = last_batch_[p];
  }
  for (std::uint32_t w = 0; w < workers(); ++w) {
    const worker_load load = active_->load(w);
    status.workers.push_back({.name = settings_.worker_names[w],
                              .healthy = healthy(w, now),
                              .prefill_tokens = load.prefill_tokens,
                              .decode_blocks = load.decode_blocks,
                              .requests = load.requests,
                              .remote = remote_ ? remote_->load(w) : worker_load{},
                              .index_blocks = blocks_per_worker[w],
                              .routed = workers_[w].routed,
                              .failures = workers_[w].failures,
                              .engine_restarts = workers_[w].engine_restarts,
                              .busy = busy(w, now),
                              .engine = now < workers_[w].engine_until ? workers_[w].engine : engine_metrics{},
                              .last_kv_batch_age = latest_batch[w] ? std::optional(now - *latest_batch[w]) : std::nullopt});
  }
  status.routed = routed_total_;
  status.prompt_blocks_routed = prompt_blocks_routed_;
  status.overlap_blocks_routed = overlap_blocks_routed_;
  status.session_bindings = sessions_.size();
  status.session_moves = sessions_.moves();
  status.dry_runs = dry_runs_;
  status.unroutable = unroutable_;
  status.expired_bookings = active_->counters().expired;
  status.index_blocks = index_->total_blocks();
  for (const auto& e : events_) status.kv_batches += e.batches;
  status.shares_bookings = remote_.has_value();
  if (remote_) {
    status.peers = remote_->peers(now);
    status.peer_counters = remote_->counters();
  }
  return status;
}

nlohmann::json worker_set_router::dump_index() const {
  nlohmann::json dump = kvr::dump_index(*index_, settings_.publisher_names);
  for (std::size_t p = 0; p < events_.size(); ++p) dump["workers"][p]["events"] = to_json(events_[p]);
  dump["subscriber_clears"] = clears_;
  dump["kv_cache_groups"] = kvr::to_json(*groups_);
  dump["lower_tiers"] = kvr::to_json(*tiers_);
  return dump;
}

}  // namespace kvr
