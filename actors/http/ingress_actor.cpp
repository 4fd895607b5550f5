#include "actors/http/ingress_actor.hpp"

#include <iostream>

#include "actors/http/http_ingress.hpp"

namespace kvr {
namespace {

ingress_actor::behavior_type ingress_behavior(ingress_actor::pointer, http_ingress* ingress) {
  return {
      [ingress](const std::shared_ptr<const routing_table>& table) {
        // Resolving can throw (e.g. no descriptor left for the resolver's io_context); the
        // actor must survive it: it is also the one that stops the server.
        try {
          ingress->set_routing_table(table);
          return true;
        } catch (const std::exception& e) {
          std::cerr << "kvrouter: routing table not installed, keeping the last one: " << e.what() << "\n";
          return false;
        }
      },
      [ingress](stop_atom) { ingress->stop(); },
  };
}

}  // namespace

ingress_actor spawn_ingress_actor(caf::actor_system& system, http_ingress& ingress) {
  return system.spawn<caf::detached>(ingress_behavior, &ingress);
}

}  // namespace kvr
