#include "core/sim/cluster_sim.hpp"

#include <deque>
#include <queue>
#include <string>
#include <utility>

#include "core/kv/block_hash.hpp"
#include "core/routing/worker_set_router.hpp"

namespace kvr::sim {
namespace {

enum class happening : std::uint8_t { arrival, submit, step_start, step_end, report, kv_delivery, tick };

struct event {
  double at_us = 0;
  std::uint64_t order = 0;  ///< ties in time keep the order they were scheduled in
  happening what = happening::arrival;
  std::uint32_t engine = 0;
  std::size_t item = 0;  ///< the request (arrival) or the KV batch (KV delivery)
  friend bool operator>(const event& a, const event& b) { return a.at_us != b.at_us ? a.at_us > b.at_us : a.order > b.order; }
};

class cluster {
 public:
  cluster(const std::vector<loadgen::request_spec>& requests, const cluster_settings& settings)
      : requests_(requests), settings_(settings), router_(router_settings(settings)), stepping_(settings.engines, false),
        in_flight_(settings.engines) {
    for (std::uint32_t e = 0; e < settings.engines; ++e) {
      engines_.emplace_back(settings.engine);
      // What the router's first scrape of an engine tells it (vllm:cache_config_info).
      engine_metrics scraped;
      scraped.num_gpu_blocks = settings.engine.num_blocks;
      scraped.block_size = settings.engine.block_size;
      router_.on_engine_metrics(e, scraped, time_point{});
    }
    result_.requests.resize(requests.size());
    last_token_us_.resize(requests.size(), 0);
  }

  cluster_result run() {
    for (std::size_t i = 0; i < requests_.size(); ++i) schedule(requests_[i].arrival_s * 1e6, happening::arrival, 0, i);
    schedule(settings_.tick_interval_us, happening::tick, 0, 0);
    while (!events_.empty() && finished_ < requests_.size()) {
      const event next = events_.top();
      events_.pop();
      now_us_ = next.at_us;
      if (next.what != happening::tick) --work_scheduled_;
      switch (next.what) {
        case happening::arrival: arrive(next.item); break;
        case happening::submit: submit(next.engine, next.item); break;
        case happening::report: report(next.item); break;
        case happening::step_start: step(next.engine); break;
        case happening::step_end: end_step(next.engine); break;
        case happening::kv_delivery: deliver(next.engine, next.item); break;
        case happening::tick:
          router_.tick(now());
          // Only while anything else can still happen: requests nothing will ever run (a set
          // that queues them forever, an engine that cannot admit them) end the run unanswered.
          if (work_scheduled_ > 0) schedule(now_us_ + settings_.tick_interval_us, happening::tick, 0, 0);
          break;
      }
    }
    for (const mocker::engine& e : engines_) {
      result_.prompt_tokens += e.counters().prefix_queries_tokens;
      result_.hit_tokens += e.counters().prefix_hits_tokens;
    }
    return std::move(result_);
  }

 private:
  static worker_set_router_settings router_settings(const cluster_settings& s) {
    worker_set_router_settings out;
    out.config = s.router;
    out.config.block_size = s.engine.block_size;
    for (std::uint32_t e = 0; e < s.engines; ++e) out.worker_names.push_back("e" + std::to_string(e));
    out.seed = s.seed;
    return out;
  }

  [[nodiscard]] time_point now() const {
    return time_point{} + std::chrono::duration_cast<duration>(std::chrono::duration<double, std::micro>(now_us_));
  }

  void schedule(double at_us, happening what, std::uint32_t engine, std::size_t item) {
    if (what != happening::tick) ++work_scheduled_;
    events_.push({at_us, next_order_++, what, engine, item});
  }

  void arrive(std::size_t id) {
    result_.requests[id].arrival_us = now_us_;
    std::vector<std::uint64_t> sequence;
    compute_local_hashes(requests_[id].prompt, settings_.engine.block_size, {}, {}, local_);
    compute_sequence_hashes(local_, sequence);
    waiting_.push_back({id, std::move(sequence)});
    place_waiting();
  }

  /// Decides the waiting requests in arrival order, until the set would queue one.
  void place_waiting() {
    while (!waiting_.empty()) {
      const std::size_t id = waiting_.front().id;
      const loadgen::request_spec& r = requests_[id];
      const route_query query{.request_id = id + 1, .sequence_hashes = waiting_.front().sequence_hashes,
                              .prompt_tokens = static_cast<std::uint32_t>(r.prompt.size())};
      const route_decision decision = router_.decide(query, now());
      if (decision.failure == route_failure::every_worker_busy) return;  // decided again when capacity frees
      waiting_.pop_front();
      if (decision.failure != route_failure::none) {
        ++finished_;
        continue;
      }
      result_.requests[id].worker = decision.worker;
      if (settings_.request_latency_us > 0) schedule(now_us_ + settings_.request_latency_us, happening::submit, decision.worker, id);
      else submit(decision.worker, id);
    }
  }

  void submit(std::uint32_t e, std::size_t id) {
    const loadgen::request_spec& r = requests_[id];
    engines_[e].submit({.id = id, .tokens = r.prompt, .max_new_tokens = r.max_tokens, .images = {}, .kv_pulled = false});
    if (!stepping_[e]) {
      stepping_[e] = true;
      schedule(now_us_, happening::step_start, e, 0);
    }
  }

  /// A first token or an end reaches router and client `request_latency_us` after its step.
  void tell_router(lifecycle_event event) {
    if (settings_.request_latency_us <= 0) {
      router_.on_lifecycle(event, now());
      return;
    }
    reports_.push_back(event);
    schedule(now_us_ + settings_.request_latency_us, happening::report, 0, reports_.size() - 1);
  }

  void report(std::size_t item) {
    router_.on_lifecycle(reports_[item], now());
    place_waiting();
  }

  void step(std::uint32_t e) {
    mocker::step_result result = engines_[e].step();
    ++result_.steps;
    if (result.outputs.empty() && result.events.empty() && result.duration_us <= 0) {
      stepping_[e] = false;  // nothing it can run now: the next submit wakes it
      return;
    }
    const double duration = result.duration_us;
    in_flight_[e] = std::move(result);  // an engine runs one step at a time
    schedule(now_us_ + duration, happening::step_end, e, 0);
  }

  void end_step(std::uint32_t e) {
    mocker::step_result result = std::exchange(in_flight_[e], {});
    bool capacity = false;
    for (const mocker::sequence_output& out : result.outputs) {
      request_outcome& r = result_.requests[out.id];
      const std::uint64_t request_id = out.id + 1;
      if (out.new_tokens > 0 && out.generated == 1) {
        r.first_token_us = now_us_ + settings_.request_latency_us;
        tell_router({.what = lifecycle_event::kind::first_token, .request_id = request_id, .worker = e, .prompt_tokens = 0});
        capacity = true;
      } else if (out.new_tokens > 0) {
        r.itl_us.push_back(now_us_ - last_token_us_[out.id]);
      }
      if (out.new_tokens > 0) last_token_us_[out.id] = now_us_;
      r.output_tokens = out.generated;
      if (out.finished) {
        r.finished_us = now_us_ + settings_.request_latency_us;
        r.ok = out.error.empty();
        result_.end_us = r.finished_us;
        ++finished_;
        tell_router({.what = lifecycle_event::kind::finished, .request_id = request_id, .worker = e, .prompt_tokens = 0});
        capacity = true;
      }
    }
    if (!result.events.empty() && settings_.router.use_kv_events) {
      batches_.push_back({.timestamp = now_us_ / 1e6, .dp_rank = std::nullopt, .events = std::move(result.events)});
      schedule(now_us_ + settings_.kv_event_delay_us, happening::kv_delivery, e, batches_.size() - 1);
    }
    if (engines_[e].idle()) stepping_[e] = false;
    else schedule(now_us_, happening::step_start, e, 0);
    if (capacity && settings_.request_latency_us <= 0) place_waiting();
  }

  void deliver(std::uint32_t e, std::size_t payload) {
    router_.on_kv_batch(e, false, batches_[payload], now());
    batches_[payload] = {};
  }

  const std::vector<loadgen::request_spec>& requests_;
  const cluster_settings& settings_;
  worker_set_router router_;
  std::vector<mocker::engine> engines_;
  std::vector<bool> stepping_;
  std::priority_queue<event, std::vector<event>, std::greater<>> events_;
  std::uint64_t next_order_ = 0;
  std::uint64_t work_scheduled_ = 0;  ///< events in the queue other than ticks
  double now_us_ = 0;
  /// Arrived and not yet placed (the set would queue them), hashed once at arrival.
  struct waiting_request {
    std::size_t id = 0;
    std::vector<std::uint64_t> sequence_hashes;
  };
  std::deque<waiting_request> waiting_;
  std::vector<mocker::step_result> in_flight_;  ///< per engine, the step it is running
  std::deque<kv_batch> batches_;           ///< KV batches in flight
  std::deque<lifecycle_event> reports_;    ///< first tokens and ends on their way to the router
  std::vector<std::uint64_t> local_;
  std::vector<double> last_token_us_;
  std::size_t finished_ = 0;
  cluster_result result_;
};

}  // namespace

cluster_result simulate(const std::vector<loadgen::request_spec>& requests, const cluster_settings& settings) {
  return cluster(requests, settings).run();
}

}  // namespace kvr::sim
