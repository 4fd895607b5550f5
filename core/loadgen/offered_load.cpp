#include "core/loadgen/offered_load.hpp"

#include <algorithm>

namespace kvr::loadgen {

double mean_cold_work_us(std::span<const request_spec> requests, const mocker::timing_model& timing) {
  if (requests.empty()) return 0;
  const double speedup = timing.speedup > 0 ? timing.speedup : 1.0;
  double total = 0;
  for (const request_spec& r : requests)
    total += static_cast<double>(r.prompt.size()) * timing.prefill_us_per_token +
             static_cast<double>(r.max_tokens) * timing.decode_us_per_sequence;
  return total / static_cast<double>(requests.size()) / speedup;
}

double rate_for_utilization(std::span<const request_spec> requests, const mocker::timing_model& timing, std::uint32_t engines,
                            double utilization) {
  const double work_us = mean_cold_work_us(requests, timing);
  if (work_us <= 0) return 0;
  return utilization * static_cast<double>(engines) * 1e6 / work_us;
}

double mean_arrival_rate(std::span<const request_spec> requests) {
  if (requests.size() < 2) return 0;
  const auto [first, last] = std::minmax_element(requests.begin(), requests.end(),
                                                 [](const request_spec& a, const request_spec& b) { return a.arrival_s < b.arrival_s; });
  const double span = last->arrival_s - first->arrival_s;
  return span > 0 ? static_cast<double>(requests.size() - 1) / span : 0;
}

void scale_arrivals(std::vector<request_spec>& requests, double rate) {
  const double now = mean_arrival_rate(requests);
  if (now <= 0 || rate <= 0) return;
  double first = requests.front().arrival_s;
  for (const request_spec& r : requests) first = std::min(first, r.arrival_s);
  const double factor = now / rate;
  for (request_spec& r : requests) r.arrival_s = (r.arrival_s - first) * factor;
}

}  // namespace kvr::loadgen
