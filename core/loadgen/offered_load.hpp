#pragma once
/// The load a workload offers to simulated engines, from their timing model, and the arrival
/// rate that makes it a chosen share of the cluster's capacity (`kvrouter-bench
/// --target-utilization`).
///
/// A request's work is what it costs an engine when nothing of it is cached: its prompt's
/// prefill (`prefill_us_per_token` per token) plus one decode slot per output token
/// (`decode_us_per_sequence`). The step's fixed cost is left out: a batch shares it, so it is
/// small per request at the loads where utilization matters. Cache hits make the real load of a
/// router lower than this figure; round-robin on a workload with little reuse comes closest.

#include <cstdint>
#include <span>
#include <vector>

#include "core/loadgen/workload.hpp"
#include "core/mocker/engine.hpp"

namespace kvr::loadgen {

/// Mean engine-µs of one request of `requests` (token-id prompts; chats count their output only).
[[nodiscard]] double mean_cold_work_us(std::span<const request_spec> requests, const mocker::timing_model& timing);

/// Requests per second at which `engines` engines would be busy `utilization` of the time.
[[nodiscard]] double rate_for_utilization(std::span<const request_spec> requests, const mocker::timing_model& timing,
                                          std::uint32_t engines, double utilization);

/// The mean arrival rate of `requests` (requests over the span of their arrival times; 0 for
/// fewer than two requests or all at once).
[[nodiscard]] double mean_arrival_rate(std::span<const request_spec> requests);

/// Rescales arrival times (from the first) so that their mean rate is `rate`, keeping the
/// shape of the arrivals (a trace's bursts stay bursts).
void scale_arrivals(std::vector<request_spec>& requests, double rate);

}  // namespace kvr::loadgen
