#pragma once
/// One worker set's running pipeline, as the watcher builds it from the set's card and its
/// effective config: the scorer always; hashers only where prefix overlap is scored; a media
/// fetcher only there and only for multimodal cards; a KV subscriber only where KV events are
/// used; a health checker when active checks are on. The components that block on sockets
/// run under drivers (actors/pipeline/component) the watcher supervises.

#include <expected>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>

#include "actors/http/routing_table.hpp"
#include "actors/pipeline/component.hpp"
#include "actors/pipeline/pipeline_settings.hpp"
#include "core/common/backoff.hpp"
#include "core/config/router_file.hpp"

namespace kvr {

class kv_subscriber;

/// A supervised component of a set: what it is, how to make it anew, its driver and its record.
struct component_slot {
  std::string name;  ///< kv_subscriber, health_checker, media_fetcher
  /// A fresh instance for a restart (the media fetcher hands back the same one: its cache and
  /// queue outlive a driver). Throws if it cannot be made.
  std::function<std::shared_ptr<pollable_component>()> make;
  std::shared_ptr<pollable_component> instance;
  caf::actor driver;  ///< null while it waits for its restart
  time_point started{};
  restart_backoff backoff;
  std::uint64_t restarts = 0;
  std::string last_failure;
};

struct running_set {
  std::uint64_t id = 0;  ///< unique per start (a restarted set is a new one)
  time_point started{};
  worker_set_route route;
  /// The KV-event decoder threads (each a component too), kept for their stats; an entry is
  /// null while its component waits for a restart.
  std::vector<std::shared_ptr<kv_subscriber>> subscribers;
  std::vector<component_slot> components;
  bool health_checks = false;
  std::shared_ptr<replica_hub> replicas;  ///< null without replica sync
};

/// Loads `card`'s tokenizer and chat template as starting the set would (files or model
/// directories), and says what is wrong with them (`kvrouter explain` checks with it).
[[nodiscard]] std::expected<void, std::string> check_model_files(const worker_set_card& card);

/// Builds `card`'s pipeline: spawns its scorer and hashers and makes its components (not yet
/// driven: see drive()). An error names the set and what is wrong with it.
[[nodiscard]] std::expected<void, std::string> start_set(caf::actor_system& system, const router_file& file,
                                                         const worker_set_card& card, const pipeline_settings& serve,
                                                         running_set& out);

/// Spawns `slot`'s driver for its current instance.
void drive(caf::actor_system& system, component_slot& slot);

/// Stops everything the set runs: component drivers at once, the scorer and hashers too unless
/// `keep_actors` (a retired set's actors answer the decisions already asked of them).
void stop_set(running_set& set, bool keep_actors);

}  // namespace kvr
