#include "core/metrics/traffic_history.hpp"

#include <algorithm>

namespace kvr {

traffic_history::traffic_history(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 2)) {}

void traffic_history::record(const traffic_sample& sample) {
  if (!samples_.empty()) {
    const traffic_sample& last = samples_.back();
    if (sample.seconds <= last.seconds) return;
    if (sample.requests < last.requests || sample.prompt_blocks < last.prompt_blocks ||
        sample.overlap_blocks < last.overlap_blocks)
      samples_.clear();
  }
  samples_.push_back(sample);
  if (samples_.size() > capacity_) samples_.pop_front();
}

std::vector<traffic_rate> traffic_history::rates() const {
  std::vector<traffic_rate> out;
  for (std::size_t i = 1; i < samples_.size(); ++i) {
    const traffic_sample& before = samples_[i - 1];
    const traffic_sample& after = samples_[i];
    traffic_rate rate{.seconds = after.seconds,
                      .requests_per_second = static_cast<double>(after.requests - before.requests) / (after.seconds - before.seconds)};
    const std::uint64_t blocks = after.prompt_blocks - before.prompt_blocks;
    if (blocks > 0) rate.hit_rate = static_cast<double>(after.overlap_blocks - before.overlap_blocks) / static_cast<double>(blocks);
    out.push_back(rate);
  }
  return out;
}

}  // namespace kvr
