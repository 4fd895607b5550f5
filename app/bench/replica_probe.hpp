#pragma once
/// What `kvrouter-bench compare --replicas N` measures of the replicas themselves while a run
/// goes: every 100 ms each replica's `/v1/router/sets` (booked requests per worker, its own and
/// what it heard from the others), and at the end their sync counters and lag.
///
/// - load imbalance: the coefficient of variation over workers of the requests booked on them
///   (all replicas' own bookings summed: the true load), averaged over the samples with load;
/// - disagreement: how far each replica's view of the booked requests (own + remote, per worker)
///   is from the true load (every replica's own bookings summed), as a share of the true load,
///   averaged over replicas and samples (0 = every replica sees the whole load; without sync
///   about 1 - 1/N: each sees its own part only);
/// - sync lag p50 / p99: each replica's own figures over its latest 4096 messages (the median of
///   the p50s, the largest p99);
/// - NATS messages per second: sent by all replicas over the run.

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace kvr::bench {

struct replication_report {
  std::size_t replicas = 1;
  bool sync = false;
  double load_cv = -1;        ///< -1 = no sample had load
  double disagreement = -1;   ///< share of the booked load; -1 = one replica
  double lag_p50_ms = -1, lag_p99_ms = -1;  ///< -1 = no sync
  double nats_messages_per_s = -1;
};

class replica_probe {
 public:
  /// Starts sampling the replicas on these loopback ports.
  replica_probe(std::vector<std::uint16_t> ports, bool sync);
  ~replica_probe();
  replica_probe(const replica_probe&) = delete;
  replica_probe& operator=(const replica_probe&) = delete;

  /// Stops sampling; the figures over the run of `wall_s` seconds.
  replication_report finish(double wall_s);

 private:
  void sample();
  [[nodiscard]] double messages_sent() const;

  std::vector<std::uint16_t> ports_;
  bool sync_;
  double sent_before_ = 0;
  std::atomic<bool> stop_{false};
  double cv_sum_ = 0, spread_sum_ = 0;
  std::size_t cv_samples_ = 0, spread_samples_ = 0;
  std::thread sampler_;
};

}  // namespace kvr::bench
