#pragma once
/// kvrouter-bench's HTTP client: sends a workload's requests as streaming token-id completions
/// (open loop at their arrival times, or closed loop at a fixed concurrency) over pooled
/// keep-alive connections, and times each answer's SSE events as they arrive: time to first
/// token, inter-token latencies, total latency.

#include <cstdint>
#include <string>
#include <vector>

#include "core/loadgen/workload.hpp"

namespace kvr::bench {

struct request_result {
  bool ok = false;
  int status = 0;
  double ttft_ms = 0;
  double latency_ms = 0;
  std::vector<double> itl_ms;
  std::uint32_t output_chunks = 0;
  /// Sent again on a new connection: the kept-alive one it first went out on was closed by the
  /// server before any byte of the answer came (the keep-alive race every HTTP client meets).
  bool resent = false;
  std::string error;
};

struct load_settings {
  std::string host = "127.0.0.1";
  std::string port = "8080";
  /// Router replicas on `host` to spread requests over (request i goes to the (i mod n)-th);
  /// empty = `port` alone.
  std::vector<std::string> ports;
  std::string model = "mock-model";
  std::size_t concurrency = 0;  ///< 0: open loop (arrival times); else closed loop
  double duration_s = 0;        ///< 0: until every request is sent; else stop sending after this
  double request_timeout_s = 300;
  bool progress = true;         ///< a progress line on stderr (when it is a terminal)
  std::string label;            ///< shown in the progress line
};

/// Runs the workload; one result per request sent (in sending order). Blocks until done.
[[nodiscard]] std::vector<request_result> run_load(const load_settings& settings,
                                                   const std::vector<loadgen::request_spec>& requests,
                                                   double& wall_seconds);

}  // namespace kvr::bench
