#pragma once
/// A worker set's scorer: owns the set's prefix index (and, with the request path, the
/// active-sequence loads and the selector). It applies KV-event batches in the order the
/// subscriber delivers them.

#include <string>
#include <vector>

#include "core/router_config.hpp"
#include "messages/scorer_actor.hpp"

namespace kvr {

struct scorer_settings {
  router_config config;                   ///< the set's effective config
  std::vector<std::string> worker_names;  ///< indexed by worker id
};

/// Spawns a scorer for one worker set.
scorer_actor spawn_scorer(caf::actor_system& system, scorer_settings settings);

}  // namespace kvr
