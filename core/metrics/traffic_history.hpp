#pragma once
/// A worker set's traffic over the last minutes, for the status page: the set's cumulative
/// counters sampled every few seconds, turned into a request rate and a cache hit rate between
/// consecutive samples. Time is passed in (seconds on any monotonic clock).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace kvr {

/// The set's counters at one moment.
struct traffic_sample {
  double seconds = 0;               ///< when it was taken
  std::uint64_t requests = 0;       ///< requests routed so far
  std::uint64_t prompt_blocks = 0;  ///< blocks of the prompts routed with prefix overlap scored
  std::uint64_t overlap_blocks = 0; ///< of them, blocks the chosen worker already cached
};

/// What happened between two samples.
struct traffic_rate {
  double seconds = 0;               ///< the later sample's time
  double requests_per_second = 0;
  /// overlap blocks / prompt blocks of the prompts routed meanwhile; none when no prompt
  /// block was routed (round-robin sets, or no traffic).
  std::optional<double> hit_rate;
};

class traffic_history {
 public:
  /// Keeps the last `capacity` samples (at least 2).
  explicit traffic_history(std::size_t capacity = 300);

  /// Adds a sample. One not later than the last is ignored; counters that went backwards (the
  /// set was restarted, its counters anew) start the history over.
  void record(const traffic_sample& sample);

  /// The rates between consecutive samples, oldest first.
  [[nodiscard]] std::vector<traffic_rate> rates() const;

  [[nodiscard]] std::size_t samples() const { return samples_.size(); }

 private:
  std::size_t capacity_;
  std::deque<traffic_sample> samples_;
};

}  // namespace kvr
