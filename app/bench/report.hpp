#pragma once
/// What one policy's run measured, and the ways kvrouter-bench shows it: a table on the
/// terminal, JSON (`--out`), CSV (`--csv`) and a PNG of TTFT distributions (`--plot`, gnuplot).

#include <string>
#include <vector>

#include "app/bench/load_client.hpp"
#include "app/bench/replica_probe.hpp"
#include "core/loadgen/stats.hpp"

namespace kvr::bench {

struct policy_report {
  std::string policy;
  double offered_rate = 0;   ///< --rate-sweep: the run's Poisson rate (requests/s); 0 = not a sweep
  std::size_t refused = 0;   ///< of the errors, answered 429 (a full queue or in-flight bound)
  std::size_t requests = 0;  ///< sent
  std::size_t errors = 0;
  /// Requests sent again on a new connection because the server had closed the kept-alive one
  /// before any byte of the answer (each once; a second failure is an error).
  std::size_t resent = 0;
  double wall_s = 0;
  double rps = 0;                ///< successful requests per second
  double output_tokens_per_s = 0;
  double hit_rate = -1;          ///< workers' prefix-cache hits / queries over the run; -1 = unknown
  loadgen::summary ttft_ms;
  loadgen::summary itl_ms;
  double router_cpu_us_per_req = -1;  ///< -1 = unknown (no router pid)
  double dims_cache_hit_rate = -1;    ///< the router's image-dimension cache, over the run; -1 = no lookups
  std::string first_error;
  std::vector<double> ttft_samples;   ///< sorted, for the plot
  replication_report replication;     ///< compare's routers, one or several (--replicas)
};

/// Summarizes a run's results.
[[nodiscard]] policy_report summarize_run(std::string policy, std::vector<request_result>& results, double wall_s);

void print_table(const std::vector<policy_report>& reports);
/// `[{"policy", "workload", "offered_rate", "requests", "errors", "refused", "rps", "hit_rate", "ttft_mean_ms", ...}, ...]`
void write_json(const std::vector<policy_report>& reports, const std::string& path, const std::string& workload);
void write_csv(const std::vector<policy_report>& reports, const std::string& path);
/// TTFT CDF per policy as a PNG, titled with `workload`; or, for a rate sweep, TTFT p50 / p99
/// and goodput against offered load, one line per policy. False (with a message on stderr) if
/// gnuplot fails. The data goes to gnuplot inline: no files are left behind.
bool write_plot(const std::vector<policy_report>& reports, const std::string& path, const std::string& workload);

}  // namespace kvr::bench
