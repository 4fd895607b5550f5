#pragma once
/// Summaries of latency samples, and reading counters out of Prometheus text.

#include <string_view>
#include <vector>

namespace kvr::loadgen {

struct summary {
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  std::size_t count = 0;
};

/// Mean and nearest-rank percentiles (zeros when empty). Sorts `samples`.
[[nodiscard]] summary summarize(std::vector<double>& samples);

/// The sum over all label sets of metric `name` in Prometheus text exposition format.
[[nodiscard]] double prometheus_sum(std::string_view text, std::string_view name);

}  // namespace kvr::loadgen
