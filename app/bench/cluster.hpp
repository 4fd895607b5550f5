#pragma once
/// The local cluster `kvrouter-bench compare` runs each policy against: fresh kvrouter-mocker
/// processes (KV events over ipc:// sockets in a scratch directory) and a kvrouter in front of
/// them with the policy's flags. Fresh per policy, so no policy inherits another's caches.
/// Also: tiny blocking HTTP GETs and /proc CPU readings, for `run` against a cluster you started.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kvr::bench {

/// The router flags of a named policy: kv, approx-kv, load-aware, round-robin, random,
/// power-of-two, least-loaded. Empty if unknown.
[[nodiscard]] std::vector<std::string> policy_flags(const std::string& policy);
/// Whether the policy reads the workers' KV events.
[[nodiscard]] bool policy_uses_kv_events(const std::string& policy);

struct cluster_settings {
  std::string kvrouter;                   ///< binary paths
  std::string mocker;
  std::size_t mockers = 4;
  std::vector<std::string> mocker_flags;  ///< appended to every mocker's command line
  std::vector<std::string> router_flags;  ///< appended to the router's
  std::string policy = "kv";
  std::string model = "mock-model";
  std::uint32_t block_size = 16;
  std::string workdir;                    ///< scratch directory (sockets, port files, logs)
  /// Router replicas in front of the same mockers; with `replica_sync`, a nats-server on a
  /// free loopback port and every replica sharing its bookings over it (docs/replicas.md).
  std::size_t replicas = 1;
  bool replica_sync = true;
  /// Disaggregated: `prefill` mockers with `--role prefill` and `decode` with `--role decode`
  /// (instead of `mockers` aggregated ones), speaking `pd` (vllm-nixl or sglang), and the
  /// router serving them with `--disaggregation pd` (docs/disaggregation.md).
  std::size_t prefill = 0;
  std::size_t decode = 0;
  std::string pd = "vllm-nixl";
};

class local_cluster {
 public:
  /// Starts everything and waits until the router is ready; throws with the logs' tail if not.
  explicit local_cluster(cluster_settings settings);
  ~local_cluster();
  local_cluster(const local_cluster&) = delete;
  local_cluster& operator=(const local_cluster&) = delete;

  [[nodiscard]] const std::vector<pid_t>& router_pids() const { return routers_; }
  [[nodiscard]] const std::vector<std::uint16_t>& router_ports() const { return router_ports_; }
  [[nodiscard]] const std::vector<std::string>& mocker_urls() const { return mocker_urls_; }
  /// The mockers whose caches prefix-aware routing aims at: every mocker, or the prefill pool.
  [[nodiscard]] std::vector<std::string> prefix_cache_urls() const {
    return settings_.prefill > 0 ? std::vector(mocker_urls_.begin(), mocker_urls_.begin() + static_cast<long>(settings_.prefill))
                                 : mocker_urls_;
  }

 private:
  void start_router(std::size_t replica, const std::vector<std::string>& workers);
  void stop_all();

  cluster_settings settings_;
  std::vector<pid_t> mockers_;
  std::vector<std::string> mocker_urls_;
  pid_t nats_ = -1;
  std::uint16_t nats_port_ = 0;
  std::vector<pid_t> routers_;
  std::vector<std::uint16_t> router_ports_;
};

/// GET http://HOST:PORT/PATH; the body, or empty on any failure (status must be 200).
[[nodiscard]] std::string http_get(const std::string& url);
/// User + system CPU seconds a process has used (/proc/PID/stat); -1 if unreadable.
[[nodiscard]] double process_cpu_seconds(pid_t pid);

}  // namespace kvr::bench
