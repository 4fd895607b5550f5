#pragma once
/// The HTTP ingress's actor: owns the server's lifecycle while its connections run on the Asio
/// I/O threads. The watcher sends it each new routing table (it resolves the workers' addresses,
/// off the I/O threads, and swaps the table in); a stop ends serving. Detached: resolving
/// blocks.

#include <memory>

#include "messages/type_ids.hpp"

namespace kvr {

class http_ingress;

using ingress_actor = caf::typed_actor<
    /// Serve by this table from now on (requests in flight keep theirs); answers once it serves by it.
    caf::replies_to<std::shared_ptr<const routing_table>>::with<bool>,
    /// Stop serving: `http_ingress::run` returns soon after.
    caf::reacts_to<stop_atom>>;

/// Spawns the actor of `ingress`, which must outlive it.
ingress_actor spawn_ingress_actor(caf::actor_system& system, http_ingress& ingress);

}  // namespace kvr
