#include "core/loadgen/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

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
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    if (!line.starts_with(name) || line.size() <= name.size()) continue;
    const char next = line[name.size()];
    if (next != '{' && next != ' ') continue;
    const auto space = line.rfind(' ');
    try {
      total += std::stod(std::string(line.substr(space + 1)));
    } catch (const std::exception&) {
    }
  }
  return total;
}

}  // namespace kvr::loadgen
