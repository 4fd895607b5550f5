#include "actors/http/ingress_server.hpp"  // first: Asio wants <utility> before it under g++ 12

#include "actors/http/request_router.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "core/kv/block_hash.hpp"

namespace kvr::ingress {
namespace {

/// Which hasher of the set's pool takes a request. A chat goes by its first bytes (its system
/// prompt and first turn), so every turn of a conversation meets the hasher whose segment cache
/// already holds the earlier messages; other prompts spread round-robin.
std::size_t hasher_for(const routing_request& request, std::uint64_t request_id, std::size_t hashers) {
  const std::string& messages = request.chat.messages_json;
  if (messages.empty()) return request_id % hashers;
  return XXH3_64bits(messages.data(), std::min<std::size_t>(messages.size(), 256)) % hashers;
}

/// A prompt of token ids needs no tokenizer: its blocks are hashed here, on the I/O thread that
/// parsed it (a few microseconds for thousands of ids), which spares the job the hop through a
/// hasher actor, a wake-up dearer than the hashing. Ingress refused it already if too long.
void hash_token_ids(const std::vector<std::uint32_t>& tokens, std::uint32_t block_size, route_job& job) {
  if (tokens.empty()) return;
  thread_local std::vector<std::uint64_t> local;
  compute_local_hashes(tokens, block_size, {}, {}, local);
  compute_sequence_hashes(local, job.sequence_hashes);
}

}  // namespace

api_error routing_error(const route_decision& decision) {
  switch (decision.failure) {
    case route_failure::prompt_too_long:
      return {api_errc::invalid_request,
              fmt::format("the prompt is at least {} tokens long (images expanded), more than this router accepts", decision.prompt_tokens),
              "messages"};
    case route_failure::input_refused: return {api_errc::invalid_request, decision.refusal, decision.refused_field};
    case route_failure::every_worker_failed: return {api_errc::worker_failed, "every available worker failed this request", {}};
    case route_failure::set_retired:
      return {api_errc::no_worker_available, "the worker set was reconfigured before this request was routed; retry", {}};
    case route_failure::queue_full:
      return {api_errc::queue_full, "every worker is busy and this model's queue is full; retry shortly", {}};
    case route_failure::queue_timeout:
      return {api_errc::queue_timeout, "every worker stayed busy for as long as this router lets a request wait", {}};
    case route_failure::no_decode_worker:
      return {api_errc::no_worker_available, "no decode worker is available for this model (its prefill workers are)", {}};
    case route_failure::every_worker_busy:  // the scorer queues these; never an answer
    case route_failure::no_healthy_worker:
    case route_failure::none: break;
  }
  return {api_errc::no_worker_available, "no healthy worker is available for this model", {}};
}

void request_router::start(std::shared_ptr<const routing_table> table, const worker_set_route& set,
                           std::shared_ptr<const routing_request> request, std::uint64_t request_id,
                           request_options options, sink_factory make_sink) {
  make_sink_ = std::move(make_sink);
  table_ = std::move(table);
  set_ = &set;
  request_ = std::move(request);
  request_id_ = request_id;
  options_ = options;
  excluded_.clear();
  attempts_ = 0;
  prompt_tokens_ = request_->prompt_tokens;
  queued_for_ = {};
}

void request_router::reset() {
  overlap_blocks_ = 0;
  table_.reset();
  set_ = nullptr;
  request_.reset();
  make_sink_ = nullptr;
}

route_verdict request_router::answer(const api_error& error) {
  return {route_verdict::kind::answer, 0, static_cast<unsigned>(http_status(error.code)), error_body(error)};
}

route_verdict request_router::route() {
  prefill_worker_.reset();
  prefill_open_ = false;
  local_prefill_ = false;
  // A disaggregated set's pairs are chosen by its scorer, whatever the mode.
  routed_locally_ = ((decides_without_state(set_->config) && !set_->disaggregation) || options_.pinned_worker) && !options_.dry_run;
  if (routed_locally_) return route_locally();
  // Requests waiting in the set's queue are bounded by the queue itself.
  const std::uint32_t bound =
      limits_.max_routing_in_flight + (queues_when_busy(set_->config) ? set_->config.queue_size : 0);
  if (set_->routing_in_flight->fetch_add(1) >= bound) {
    set_->routing_in_flight->fetch_sub(1);
    probe_.overloaded();
    return answer({api_errc::overloaded, "the router is overloaded; retry shortly", {}});
  }
  auto job = std::make_shared<route_job>();  // its sink is made only if an actor answers it
  job->request_id = request_id_;
  job->request = request_;
  job->excluded_workers = excluded_;
  job->dry_run = options_.dry_run;
  job->priority = options_.priority;
  job->session = options_.session;
  job->disaggregate = options_.disaggregate;
  // Only prompts the set's hashers can hash take the extra hop (core/prompt/prompt_plan).
  job->plan = set_->hashers.empty() ? prompt_plan{} : plan_prompt(*request_, set_->prompts);
  if (job->plan.path == prompt_path::token_ids) {
    hash_token_ids(request_->prompt_token_ids, set_->config.block_size, *job);
  } else if (job->plan.needs_hasher()) {
    job->reply = make_sink_();
    caf::anon_send(set_->hashers[hasher_for(*request_, request_id_, set_->hashers.size())], std::move(job));
    return {};
  }
  if (auto decision = set_->scoring->try_decide(query_of(*job))) return on_decision(*decision);
  job->reply = make_sink_();
  caf::anon_send(set_->scorer, std::move(job));
  return {};
}

/// Round-robin, random and pinned requests: picked here, booked through the thread's lifecycle reporter.
route_verdict request_router::route_locally() {
  const auto worker = options_.pinned_worker ? std::optional(*options_.pinned_worker) : thread_.local.pick(*set_, excluded_);
  if (!worker) {
    route_decision none;
    none.failure = excluded_.empty() ? route_failure::no_healthy_worker : route_failure::every_worker_failed;
    return answer(routing_error(none));
  }
  thread_.report(set_->scorer, {lifecycle_event::kind::booked, request_id_, *worker, request_->prompt_tokens});
  return proxy_to(*worker);
}

route_verdict request_router::on_decision(const route_decision& decision) {
  set_->routing_in_flight->fetch_sub(1);
  queued_for_ += decision.queued_for;
  if (decision.prompt_tokens > 0) prompt_tokens_ = decision.prompt_tokens;
  if (!decision.ok()) return answer(routing_error(decision));
  if (options_.dry_run) return answer_dry_run(decision);
  overlap_blocks_ = decision.overlap_blocks;
  prefill_worker_ = decision.prefill_worker;
  prefill_open_ = prefill_worker_.has_value();
  local_prefill_ = decision.local_prefill;
  if (prefill_worker_) overlap_blocks_ = decision.prefill_overlap_blocks;  // the cache that served the prompt
  return proxy_to(decision.worker);
}

void request_router::prefill_done() {
  if (!prefill_open_) return;
  prefill_open_ = false;
  tell_scorer(lifecycle_event::kind::finished, prefill_leg_id(request_id_), *prefill_worker_);
}

route_verdict request_router::on_prefill_failed(std::string_view why) {
  probe_.upstream_failed();
  prefill_open_ = false;
  tell_scorer(lifecycle_event::kind::worker_failed, prefill_leg_id(request_id_), *prefill_worker_);
  finished();  // the decode leg never started
  const std::uint32_t failed = *prefill_worker_;
  return retry_without(failed, fmt::format("{} on prefill worker {}", why, set_->workers[failed].name));
}

route_verdict request_router::retry_without(std::uint32_t failed, std::string_view last_failure) {
  excluded_.push_back(failed);
  if (attempts_ <= limits_.max_retries && !options_.pinned_worker) {
    probe_.retried();
    return route();
  }
  return answer({api_errc::worker_failed,
                 fmt::format("workers failed before answering ({} attempts; last: {})", attempts_, last_failure), {}});
}

route_verdict request_router::proxy_to(std::uint32_t worker) {
  worker_ = worker;
  ++attempts_;
  finished_ = false;
  return {route_verdict::kind::proxy, worker, 0, {}};
}

void request_router::blame_worker() {
  probe_.upstream_failed();
  tell_scorer(lifecycle_event::kind::worker_failed);
}

route_verdict request_router::on_worker_failed(std::string_view why) {
  prefill_done();
  blame_worker();
  return retry_without(worker_, fmt::format("{} on {}", why, set_->workers[worker_].name));
}

route_verdict request_router::migrate(std::shared_ptr<const routing_request> continuation) {
  prefill_done();
  if (!finished_) blame_worker();
  finished_ = true;
  excluded_.push_back(worker_);
  request_ = std::move(continuation);
  prompt_tokens_ = request_->prompt_tokens;
  options_.session = 0;  // the continuation goes where the cost says; its conversation's binding stays
  return route();
}

route_verdict request_router::answer_dry_run(const route_decision& decision) const {
  probe_.dry_run();
  nlohmann::json candidates = nlohmann::json::array();
  for (const candidate_view& c : decision.candidates)
    candidates.push_back({{"worker", set_->workers[c.worker].name},
                          {"overlap_blocks", c.overlap_blocks},
                          {"active_prefill_tokens", c.active_prefill_tokens},
                          {"active_decode_blocks", c.active_decode_blocks},
                          {"remote_prefill_tokens", c.remote_prefill_tokens},
                          {"remote_decode_blocks", c.remote_decode_blocks},
                          {"cached_blocks", c.cached_blocks},
                          {"cache_capacity_blocks", c.cache_capacity_blocks ? nlohmann::json(*c.cache_capacity_blocks) : nlohmann::json(nullptr)},
                          {"evicted_blocks", c.evicted_blocks},
                          {"engine_queued_requests", c.engine_queued_requests},
                          {"cost", c.cost ? nlohmann::json(*c.cost) : nlohmann::json(nullptr)},
                          {"healthy", c.healthy},
                          {"busy", c.busy}});
  const worker_target& worker = set_->workers[decision.worker];
  return {route_verdict::kind::answer, 0, 200,
          nlohmann::json{{"worker", worker.name},
                         {"url", worker.url},
                         {"router_mode", std::string(to_string(set_->config.mode))},
                         {"overlap_blocks", decision.overlap_blocks},
                         {"prompt_blocks", decision.prompt_blocks},
                         {"prompt_tokens", decision.prompt_tokens},
                         {"cost", decision.cost},
                         {"candidates", std::move(candidates)},
                         {"prefill_worker", decision.prefill_worker ? nlohmann::json(set_->workers[*decision.prefill_worker].name)
                                                                    : nlohmann::json(nullptr)},
                         {"prefill_overlap_blocks", decision.prefill_overlap_blocks},
                         {"local_prefill", decision.local_prefill}}
              .dump()};
}

void request_router::withdraw() {
  if (set_ != nullptr && !routed_locally_) caf::anon_send(set_->scorer, withdraw_atom_v, request_id_);
}

void request_router::tell_scorer(lifecycle_event::kind what) { tell_scorer(what, request_id_, worker_); }

void request_router::tell_scorer(lifecycle_event::kind what, std::uint64_t booking, std::uint32_t worker) {
  const lifecycle_event event{what, booking, worker, 0};
  if (routed_locally_) return thread_.report(set_->scorer, event);
  if (what != lifecycle_event::kind::booked) set_->scoring->report(event, set_->scorer);  // booked when decided
}

}  // namespace kvr::ingress
