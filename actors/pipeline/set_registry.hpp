#pragma once
/// The running worker sets, kept in step with the config and supervised. A config change
/// starts what it adds or changes, stops what it removes or changes and keeps the rest
/// untouched; retired sets stop their components at once and their actors 10 s later, so that
/// routing decisions already asked of them are answered. Every actor of a running set is
/// monitored (by the watcher, through `monitor`): a component driver that dies is restarted
/// alone, a scorer or hasher that dies restarts its whole set (its state is the set's), each
/// after a back-off, with the set reported degraded meanwhile.

#include <chrono>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_addr.hpp>

#include "actors/pipeline/set_pipeline.hpp"

namespace kvr {

class set_registry {
 public:
  /// Asks the watcher to monitor an actor (its down message comes back to on_down).
  using monitor_fn = std::function<void(const caf::actor&)>;

  set_registry(caf::actor_system& system, const pipeline_settings& serve, monitor_fn monitor);
  ~set_registry();

  /// Applies `next`; on failure nothing changes. Returns the table to install.
  [[nodiscard]] std::expected<std::shared_ptr<routing_table>, std::string> apply(const router_file& next, reload_plan& plan);

  /// What the watcher schedules after a death: restart `component` of set `set_id` (empty
  /// component: the whole set) after `delay`.
  struct restart_order {
    std::uint64_t set_id = 0;
    std::string component;
    std::chrono::milliseconds delay{0};
  };
  /// A monitored actor went down. Actors of retired sets, or stopped on purpose, need nothing.
  [[nodiscard]] std::optional<restart_order> on_down(const caf::actor_addr& who, const caf::error& reason);
  /// Carries out a restart order; the table to install, or null if the set is gone meanwhile.
  [[nodiscard]] std::shared_ptr<routing_table> restart(std::uint64_t set_id, const std::string& component);
  /// Kills one actor of a running set as a crash would (fault injection): component is
  /// kv_subscriber, health_checker, media_fetcher, scorer or hasher. False if there is none.
  bool kill(const std::string& set, const std::string& component);

  /// The routing table of what runs now (sets, their pipelines, supervision state).
  [[nodiscard]] std::shared_ptr<routing_table> table() const;
  /// Ends retired sets whose grace period is over, and gives freed memory back to the system a
  /// little after a set or component has gone.
  void reap();

 private:
  struct retired {
    std::shared_ptr<running_set> set;
    std::chrono::steady_clock::time_point at;
  };

  std::expected<std::shared_ptr<running_set>, std::string> start(const router_file& file, const worker_set_card& card);
  void retire(const std::shared_ptr<running_set>& set);
  [[nodiscard]] running_set* find(std::uint64_t id);

  caf::actor_system& system_;
  const pipeline_settings& serve_;
  monitor_fn monitor_;
  router_file current_;
  std::map<std::string, std::shared_ptr<running_set>> running_;
  std::vector<retired> graveyard_;
  /// When to hand freed heap back (malloc_trim): a stopped set's or component's memory was freed
  /// on the threads of its detached actors, and glibc keeps each thread arena's free pages, so
  /// without it every reload or restart would leave its high-water mark behind.
  std::optional<std::chrono::steady_clock::time_point> trim_at_;
  std::uint64_t next_id_ = 1;
  /// Per set name: restarts of the whole set, and the back-off between them.
  std::map<std::string, std::pair<std::uint64_t, restart_backoff>> set_restarts_;
};

}  // namespace kvr
