#pragma once
/// A fixed-bucket histogram of durations, for Prometheus (`_bucket{le=...}`, `_sum`, `_count`).
/// Fixed buckets keep it a plain value: copied into snapshots, never allocating.

#include <array>
#include <cstdint>

#include "core/common/time.hpp"

namespace kvr {

class latency_histogram {
 public:
  /// Upper bounds in seconds; an implicit +Inf bucket follows.
  static constexpr std::array<double, 14> bounds{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                 0.5,   1.0,   2.5,  5.0,   10.0, 30.0, 60.0};

  void record(duration d) {
    const double seconds = std::chrono::duration<double>(d).count();
    std::size_t i = 0;
    while (i < bounds.size() && seconds > bounds[i]) ++i;
    ++counts_[i];
    sum_seconds_ += seconds;
    ++count_;
  }

  /// Observations <= bounds[i] (cumulative, as Prometheus wants); i == bounds.size() is +Inf.
  [[nodiscard]] std::uint64_t cumulative(std::size_t i) const {
    std::uint64_t total = 0;
    for (std::size_t j = 0; j <= i && j < counts_.size(); ++j) total += counts_[j];
    return total;
  }
  [[nodiscard]] double sum_seconds() const { return sum_seconds_; }
  [[nodiscard]] std::uint64_t count() const { return count_; }

 private:
  std::array<std::uint64_t, bounds.size() + 1> counts_{};
  double sum_seconds_ = 0.0;
  std::uint64_t count_ = 0;
};

}  // namespace kvr
