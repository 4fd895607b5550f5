#pragma once
/// `GET path` on each of a set of HTTP targets, every interval, on one I/O context that the
/// owner drives (`run_for`). The loop under the health checker and the engine-metrics scraper:
/// each target waits `interval` after its last answer, so a slow worker is never asked twice at
/// once; the answer's body is bounded by `body_limit` (a larger one is a failed poll).

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kvr {

struct poll_target {
  std::string host;
  std::string port;
  std::string path;  ///< e.g. "/health", "/engine-a/metrics"
  bool tls = false;  ///< an https:// worker
};

struct poll_result {
  bool answered = false;  ///< an HTTP answer arrived (any status)
  unsigned status = 0;
  std::string_view body;  ///< valid during the callback only
  std::string error;      ///< when not answered: what failed (resolve, connect, read, timeout, too large)
};

struct poll_settings {
  std::chrono::milliseconds interval{1000};
  std::chrono::milliseconds timeout{1000};
  std::size_t body_limit = 1 << 20;
  std::string ca_file;  ///< trust for https:// targets besides the system's CAs
};

class http_poller {
 public:
  using result_handler = std::function<void(std::size_t target, const poll_result& result)>;

  /// Starts polling every target (each first after one interval); `on_result` runs on the
  /// thread that calls `run_for`.
  http_poller(poll_settings settings, std::vector<poll_target> targets, result_handler on_result);
  ~http_poller();
  http_poller(const http_poller&) = delete;
  http_poller& operator=(const http_poller&) = delete;

  /// Runs the polls' I/O for `budget`.
  void run_for(std::chrono::milliseconds budget);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kvr
