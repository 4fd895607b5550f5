#pragma once
/// `kvrouter-bench simulate`: compare's policies on the virtual-time cluster (core/sim), with
/// compare's mocker and router flags, in one table. Seconds instead of minutes per policy.

#include <string>
#include <vector>

#include "app/bench/report.hpp"
#include "core/loadgen/workload.hpp"
#include "core/mocker/engine.hpp"

namespace kvr::bench {

struct simulate_settings {
  std::vector<std::string> policies;
  std::size_t engines = 4;
  /// As `--mocker-flag` passes them to kvrouter-mocker; the engine model's flags only.
  std::vector<std::string> mocker_flags;
  /// As `--router-flag` passes them to kvrouter; router knobs only (`--max-index-blocks N`, ...).
  std::vector<std::string> router_flags;
  double kv_event_delay_ms = 1.0;
  double request_latency_ms = 2.0;  ///< router to engine and back (core/sim's request_latency_us)
};

/// The engine model's settings from kvrouter-mocker's flags. `strict`: a flag the model does not
/// cover throws (simulate would silently differ from compare); else it is skipped.
[[nodiscard]] mocker::engine_settings engine_model(const std::vector<std::string>& mocker_flags, bool strict);

/// One report per policy (hit rate from the engines' counters, TTFT and ITL from the virtual
/// clock, wall time = the simulated run's length). Throws std::runtime_error naming a flag or
/// policy it cannot model.
[[nodiscard]] std::vector<policy_report> simulate_policies(const simulate_settings& settings,
                                                           const std::vector<loadgen::request_spec>& requests);

}  // namespace kvr::bench
