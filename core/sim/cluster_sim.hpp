#pragma once
/// A routed cluster in virtual time: the router's own core (`worker_set_router`: the prefix
/// index, bookings, the selector and its cost function) in front of simulated engines
/// (`mocker::engine`: paged cache, continuous batching, the timing model), event-driven and
/// deterministic. A request is hashed and decided at its arrival and queued on its engine; an
/// engine steps while it has work, and at each step's end its first tokens and ends reach the
/// router, its KV events `kv_event_delay_us` later (ZeroMQ and decoding, in the real router).
/// A trace that `kvrouter-bench compare` replays in minutes runs here in seconds, so policies
/// and knobs can be searched here and the winners confirmed with `compare`.
///
/// Not modelled: HTTP and streaming costs, the hashers' queueing, several replicas,
/// disaggregated serving, the admission queue's priorities (a request the set would queue
/// waits in arrival order and is decided again when capacity frees).

#include <cstdint>
#include <vector>

#include "core/config/router_config.hpp"
#include "core/loadgen/workload.hpp"
#include "core/mocker/engine.hpp"

namespace kvr::sim {

struct cluster_settings {
  std::uint32_t engines = 4;
  mocker::engine_settings engine;  ///< every engine's; its block size is the router's
  router_config router;            ///< the set's config (mode, weights, kv events or approximate)
  double kv_event_delay_us = 1000;
  /// A request's way from the router to its engine, and of its tokens back to router and client
  /// (HTTP, the proxy, an engine's wake-up): the engine gets it this long after the decision, and
  /// the router books its first token and end (and the client sees them) this long after the step.
  double request_latency_us = 0;
  double tick_interval_us = 1e6;  ///< router housekeeping (expiries)
  std::uint64_t seed = 1;         ///< the selector's tie-breaks
};

struct request_outcome {
  double arrival_us = 0;
  double first_token_us = -1;  ///< -1: none (failed)
  double finished_us = -1;
  std::uint32_t worker = 0;
  std::uint32_t output_tokens = 0;
  std::vector<double> itl_us;  ///< the gaps between its tokens
  bool ok = false;
};

struct cluster_result {
  std::vector<request_outcome> requests;
  std::uint64_t prompt_tokens = 0;  ///< the engines' prefix-cache queries (tokens)
  std::uint64_t hit_tokens = 0;     ///< of which were cached
  double end_us = 0;                ///< when the last request finished
  std::uint64_t steps = 0;          ///< engine steps simulated
};

/// Replays `requests` (token-id prompts; chats are not simulated) at their arrival times.
[[nodiscard]] cluster_result simulate(const std::vector<loadgen::request_spec>& requests, const cluster_settings& settings);

}  // namespace kvr::sim
