#include "core/loadgen/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/metrics/prometheus_text.hpp"

namespace kvr::loadgen {

summary summarize(std::vector<double>& samples) {
  summary s;
  s.count = samples.size();
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  auto rank = [&](double p) {
    const auto index = static_cast<std::size_t>(std::ceil(p * static_cast<double>(samples.size()))) - 1;
    return samples[std::min(index, samples.size() - 1)];
  };
  s.p50 = rank(0.50);
  s.p90 = rank(0.90);
  s.p99 = rank(0.99);
  return s;
}

double prometheus_sum(std::string_view text, std::string_view name) {
  double total = 0;
  parse_prometheus_text(text, [&](const prometheus_sample& sample) {
    if (sample.name == name && std::isfinite(sample.value)) total += sample.value;
  });
  return total;
}

}  // namespace kvr::loadgen
