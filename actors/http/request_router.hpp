#pragma once
/// The routing half of one request's life, on its connection's I/O thread: which path the
/// request takes to a worker (a local pick, the scorer, or a hasher first), how many workers it
/// may try and which are excluded after failing it, what the scorer hears of it, and which
/// answer a client gets when no worker can be found. It never touches a socket: the session
/// acts on its verdicts.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/http/routing_table.hpp"
#include "core/prompt/openai.hpp"
#include "messages/route_messages.hpp"

namespace kvr::ingress {

struct io_thread;
class ingress_probe;

/// What the session does next.
struct route_verdict {
  enum class kind : std::uint8_t {
    proxy,   ///< send the request to `worker`
    wait,    ///< a decision was asked of the set's actors; it arrives through the sink
    answer,  ///< answer the client directly: `status` and `body` (an error or a dry run)
  };
  kind what = kind::wait;
  std::uint32_t worker = 0;
  unsigned status = 200;
  std::string body;
};

/// How the client asked for its request to be routed (its `x-kvrouter-*` headers).
struct request_options {
  bool dry_run = false;  ///< decide, but book nothing and answer with the decision
  request_priority priority = request_priority::normal;  ///< its place in the set's queue
  /// `x-kvrouter-worker: NAME`: this worker of the set, healthy or not, with no retry elsewhere
  /// (booked and counted like any request).
  std::optional<std::uint32_t> pinned_worker;
  /// The conversation's key for session affinity (a hash of its session header or `user`); 0 = none.
  std::uint64_t session = 0;
  /// The set is disaggregated and the request may be split into a prefill and a decode leg.
  bool disaggregate = false;
};

/// The answer a client gets when routing chose no worker (`decision` says why).
[[nodiscard]] api_error routing_error(const route_decision& decision);

class request_router {
 public:
  struct limits {
    std::uint32_t max_retries = 2;               ///< re-routes after a worker fails before answering
    std::uint32_t max_routing_in_flight = 1024;  ///< per worker set; beyond, 503 at once
  };

  request_router(io_thread& thread, ingress_probe& probe, limits limits) : thread_(thread), probe_(probe), limits_(limits) {}

  /// Makes the sink an actor's decision goes to (called only when one is asked for).
  using sink_factory = std::function<route_sink()>;

  /// Starts routing a parsed request of `set` (kept alive by `table`).
  void start(std::shared_ptr<const routing_table> table, const worker_set_route& set,
             std::shared_ptr<const routing_request> request, std::uint64_t request_id, request_options options,
             sink_factory make_sink);
  /// Picks a worker: here for round-robin and random; in the set's scorer core, here too, for a
  /// prompt that needs no hasher while the core is free; else by asking the set's actors, whose
  /// answer goes to a sink from the factory (called once, on an actor's thread).
  [[nodiscard]] route_verdict route();
  /// The actors' decision arrived (on the I/O thread).
  [[nodiscard]] route_verdict on_decision(const route_decision& decision);
  /// The chosen worker failed before answering: it is reported and excluded, and the request
  /// is routed again while attempts remain.
  [[nodiscard]] route_verdict on_worker_failed(std::string_view why);

  /// The chosen worker failed before answering: reported (its booking released, the worker
  /// kept out a while) and counted, with no retry.
  void blame_worker();
  /// The chosen worker broke off an answer the client is reading: it is reported (its booking
  /// released at once, the worker kept out a while) and excluded with every worker that failed
  /// the request before, and `continuation` (a token-id prompt: the prompt's and the answer's
  /// tokens so far) is routed in the request's place, on the set's full cost.
  [[nodiscard]] route_verdict migrate(std::shared_ptr<const routing_request> continuation);
  /// `x-kvrouter-worker` named the worker: nowhere else to go.
  [[nodiscard]] bool pinned() const { return options_.pinned_worker.has_value(); }
  /// The worker's first bytes arrived: its prefill is done.
  void first_token() { tell_scorer(lifecycle_event::kind::first_token); }
  /// The request ended, however it ended: its booking is released (once; later calls for the
  /// same attempt are no-ops), its prefill leg's too if that is still open.
  void finished() {
    prefill_done();
    if (finished_) return;
    finished_ = true;
    tell_scorer(lifecycle_event::kind::finished);
  }

  // -- a disaggregated request's prefill leg ---------------------------------------------------
  /// The disaggregated set kept the request on its decode worker (`max_local_prefill_tokens`).
  [[nodiscard]] bool local_prefill() const { return local_prefill_; }
  /// The chosen prefill worker (none: the request runs whole on worker()).
  [[nodiscard]] const worker_target* prefill_worker() const {
    return prefill_worker_ ? &set_->workers[*prefill_worker_] : nullptr;
  }
  /// The prefill leg ended (answered, or given up): its booking is released, once.
  void prefill_done();
  /// The prefill worker failed before answering: it is blamed, the decode leg's booking is
  /// released, and a new pair is chosen without it while attempts remain.
  [[nodiscard]] route_verdict on_prefill_failed(std::string_view why);
  /// The prefill worker answered without transfer params: the request runs on the decode
  /// worker alone from here (its booking stays; the prefill leg's is released).
  void run_aggregated() { prefill_done(); prefill_worker_.reset(); }
  /// The client left while its request was being routed: if it waits in the set's queue, it
  /// is taken out (nothing was booked for it).
  void withdraw();
  /// Forgets the request (the connection moves on to its next one).
  void reset();

  [[nodiscard]] const worker_set_route& set() const { return *set_; }
  [[nodiscard]] const worker_target& worker() const { return set_->workers[worker_]; }
  /// Cached prompt blocks the chosen worker was scored with (0 when routed without the index).
  [[nodiscard]] std::uint32_t overlap_blocks() const { return overlap_blocks_; }
  /// The prompt's length as routing knew it: exact once tokenized, else the request's estimate.
  [[nodiscard]] std::uint32_t prompt_tokens() const { return prompt_tokens_; }
  /// Workers tried so far (retries + 1).
  [[nodiscard]] std::uint32_t attempts() const { return attempts_; }
  /// Time spent in the set's queue, over every attempt.
  [[nodiscard]] duration queued_for() const { return queued_for_; }
  [[nodiscard]] const routing_request& request() const { return *request_; }
  [[nodiscard]] bool routing() const { return set_ != nullptr; }

 private:
  [[nodiscard]] route_verdict proxy_to(std::uint32_t worker);
  /// `failed` is left out of the next pick, made while attempts remain; else the client gets 502.
  [[nodiscard]] route_verdict retry_without(std::uint32_t failed, std::string_view last_failure);
  [[nodiscard]] route_verdict route_locally();
  [[nodiscard]] route_verdict answer_dry_run(const route_decision& decision) const;
  [[nodiscard]] static route_verdict answer(const api_error& error);
  /// A step of this request's life for the scorer: batched through the thread when the thread
  /// routed it, else applied in the scorer's core (at once, or by its next holder).
  void tell_scorer(lifecycle_event::kind what);
  void tell_scorer(lifecycle_event::kind what, std::uint64_t booking, std::uint32_t worker);

  io_thread& thread_;
  ingress_probe& probe_;
  limits limits_;
  std::shared_ptr<const routing_table> table_;  ///< keeps set_ alive for this request
  const worker_set_route* set_ = nullptr;
  std::shared_ptr<const routing_request> request_;
  std::uint64_t request_id_ = 0;
  sink_factory make_sink_;
  request_options options_;
  bool routed_locally_ = false;  ///< picked by this thread (round-robin, random), not the scorer
  bool finished_ = false;        ///< the current attempt's booking was released
  std::optional<std::uint32_t> prefill_worker_;  ///< a disaggregated attempt's prefill worker
  bool prefill_open_ = false;                    ///< its booking is not released yet
  bool local_prefill_ = false;  ///< the scorer kept a disaggregated request on its decode worker
  std::vector<std::uint32_t> excluded_;
  std::uint32_t attempts_ = 0;
  std::uint32_t worker_ = 0;
  std::uint32_t overlap_blocks_ = 0;
  std::uint32_t prompt_tokens_ = 0;
  duration queued_for_{};
};

}  // namespace kvr::ingress
