#pragma once
/// The watcher: owns the worker sets' pipelines and keeps them in step with the discovery
/// sources. It resolves each set's effective config once per change, spawns what the gate says
/// (the scorer always; hashers only where prefix overlap is scored; a KV subscriber only where
/// KV events are used; health checks), retires what a change removes, supervises what runs
/// (actors/pipeline/set_registry: a component that dies is restarted with back-off), and sends
/// an immutable routing table to the ingress actor to swap in (docs/configuration.md).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <string>

#include "actors/sources/etcd_source.hpp"
#include "actors/sources/health_checker.hpp"
#include "actors/pipeline/media_fetcher.hpp"
#include "actors/pipeline/pipeline_settings.hpp"
#include "actors/http/ingress_actor.hpp"
#include "actors/http/routing_table.hpp"
#include "core/config/router_file.hpp"

namespace kvr {

/// Config changes the watcher applied or rejected, by source (read by /metrics).
struct config_reload_counters {
  std::atomic<std::uint64_t> file_applied{0}, file_rejected{0}, etcd_applied{0}, etcd_rejected{0};

  /// `kvrouter_config_reloads_total{source, result}`.
  void write_metrics(std::string& out) const;
};

struct watcher_settings {
  pipeline_settings pipeline;
  std::string config_path;    ///< polled for edits when set
  router_config etcd_global;  ///< with etcd: the global config the cards are resolved against
  /// Where new routing tables go (the ingress actor, actors/http/ingress_actor.hpp).
  ingress_actor ingress;
  std::shared_ptr<config_reload_counters> reloads = std::make_shared<config_reload_counters>();
};

using watcher_actor = caf::typed_actor<
    /// Start serving `file`; answers "" or why it could not.
    caf::replies_to<apply_atom, std::shared_ptr<const router_file>>::with<std::string>,
    /// etcd's prefix as it now stands.
    caf::reacts_to<std::shared_ptr<const etcd_cards>>,
    /// Poll the config file, retire old pipelines.
    caf::reacts_to<tick_atom>,
    /// A supervision order: restart this component (empty: the whole set) of the set with this id.
    caf::reacts_to<restart_atom, std::uint64_t, std::string>,
    /// Fault injection (operators' drills, tests): kill a component of a set as a crash would;
    /// answers whether there was one.
    caf::replies_to<fault_atom, std::string, std::string>::with<bool>>;

watcher_actor spawn_watcher(caf::actor_system& system, watcher_settings settings);

/// Reads and parses a config file; the error names the file.
[[nodiscard]] std::expected<router_file, std::string> load_router_file(const std::string& path);

}  // namespace kvr
