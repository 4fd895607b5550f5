#pragma once
/// The process's side of replica sync (docs/replicas.md): one NATS link shared by every worker
/// set. Scorers hand it their booking steps and snapshots (actors/replica/peer_publisher
/// batches, encodes and publishes them on its own thread, so routing never waits on NATS);
/// what arrives on `PREFIX.*.*` is decoded here and left in the peer inbox of the set the
/// subject names, for its scorer. Echoes, unknown sets, malformed messages and messages for an
/// inbox that is full are counted and dropped. It also says when a new replica is warm enough
/// to report ready.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "actors/replica/peer_inbox.hpp"
#include "actors/replica/peer_publisher.hpp"
#include "core/common/latency_histogram.hpp"
#include "core/replica/peer_subjects.hpp"
#include "messages/scorer_actor.hpp"

namespace kvr {

class nats_link;

struct replica_settings {
  std::vector<std::string> servers;  ///< --nats, split at commas; empty = no replicas
  std::string replica_id;            ///< --replica-id (serve fills in hostname-pid)
  std::string subject_prefix = "kvrouter";
  /// /ready waits at most this long for NATS and the peers' first snapshots.
  std::chrono::milliseconds warmup{2000};
  /// How often each replica publishes its bookings (its scorers' 1 s tick): what the warm-up
  /// and the peer timeout (three of them) assume.
  std::chrono::milliseconds snapshot_interval{1000};
  std::chrono::microseconds batch_delay{1000};  ///< a set's booking steps go at most this late
  std::size_t batch_events = 256;               ///< or as soon as this many are waiting
};

class replica_hub {
 public:
  /// Starts connecting (an unreachable server is retried, not fatal); throws on bad settings.
  explicit replica_hub(replica_settings settings);
  ~replica_hub();
  replica_hub(const replica_hub&) = delete;
  replica_hub& operator=(const replica_hub&) = delete;

  /// Peers' messages for set `name` go to `inbox` from now on, and `scorer` is woken when they
  /// should not wait (replacing an earlier scorer, whose messages are no longer published).
  /// The scorer is held weakly: its life is its set's.
  void attach(const std::string& name, const caf::actor_addr& scorer, std::shared_ptr<peer_inbox> inbox);
  /// Only if `scorer` is still the set's (a restarted set attached its new one already).
  void detach(const std::string& name, const caf::actor_addr& scorer);
  /// Hands over booking steps / a snapshot of set `name` from `scorer` to publish; never
  /// blocks. Ignored when `scorer` is not the set's attached one (a retired set's scorer
  /// answering its last jobs).
  void share(const std::string& name, const caf::actor_addr& scorer, std::vector<peer_event> events) {
    publisher_->share(name, scorer, std::move(events));
  }
  void share_snapshot(const std::string& name, const caf::actor_addr& scorer, std::vector<peer_snapshot_entry> bookings) {
    publisher_->share_snapshot(name, scorer, std::move(bookings));
  }

  [[nodiscard]] const replica_settings& settings() const { return settings_; }
  [[nodiscard]] bool connected() const;
  /// Why /ready should still say no (NATS not reached, peers' snapshots not heard yet), until
  /// the warm-up has passed; none once warm.
  [[nodiscard]] std::optional<std::string> warming_up() const;
  /// The warm-up time since start has passed: /ready waits for nothing of the replicas'.
  [[nodiscard]] bool warm_up_over() const { return std::chrono::steady_clock::now() - started_ >= settings_.warmup; }
  void write_metrics(std::string& out) const;
  /// `/v1/router/sets`'s "replication": the replica, NATS state, counters, sync lag quantiles.
  [[nodiscard]] nlohmann::json status() const;

 private:
  void on_message(std::string_view subject, std::span<const std::uint8_t> data);
  void on_state(bool connected);
  void record_lag(std::int64_t sent_unix_ns);

  replica_settings settings_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::atomic<std::int64_t> first_connected_ns_{0};  ///< steady clock; 0 = never yet

  struct attached_set {
    caf::actor_addr scorer;
    std::shared_ptr<peer_inbox> inbox;
  };
  mutable std::shared_mutex sets_mutex_;
  std::unordered_map<std::string, attached_set> sets_;  ///< by subject token

  struct counters {
    std::atomic<std::uint64_t> received{0}, received_bytes{0};
    std::atomic<std::uint64_t> malformed{0}, unknown_set{0}, echo{0}, inbox_full{0};
    std::atomic<std::uint64_t> disconnects{0}, reconnects{0};
  } counters_;
  mutable std::mutex lag_mutex_;
  latency_histogram lag_;
  std::vector<double> recent_lag_ms_;  ///< a ring of the latest lags, for exact quantiles
  std::size_t recent_next_ = 0;

  std::unique_ptr<nats_link> link_;  ///< after the above: its callbacks use them
  std::unique_ptr<peer_publisher> publisher_;  ///< last: its thread publishes on link_
};

}  // namespace kvr
