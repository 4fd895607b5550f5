#pragma once
/// The status page: `GET /` (also `/dashboard`) serves one self-contained HTML page (no external
/// assets; actors/http/status_page.html, compiled in) that polls `GET /v1/router/status` every
/// two seconds and draws each set's workers, health, loads and index size, and its request and
/// hit rates over the last ten minutes.

#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "actors/http/routing_table.hpp"
#include "core/metrics/traffic_history.hpp"

namespace kvr {

/// The page itself (text/html).
[[nodiscard]] std::string_view status_page_html();

/// Each set's traffic history, sampled from the scorers' snapshots by one I/O thread and read
/// by whichever serves `/v1/router/status`.
class traffic_recorder {
 public:
  static constexpr double sample_period_seconds = 2;
  static constexpr std::size_t samples_kept = 300;  ///< ten minutes

  /// Samples every set of `table` at `seconds`; sets no longer in it are forgotten.
  void sample(const routing_table& table, double seconds);

  /// `GET /v1/router/status`: per set its workers' state now and its history, times in
  /// seconds before `seconds` (now).
  [[nodiscard]] std::string status_json(const routing_table& table, double seconds) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, traffic_history> sets_;
};

}  // namespace kvr
