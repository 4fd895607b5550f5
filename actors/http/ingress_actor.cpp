#include "actors/http/ingress_actor.hpp"

#include "actors/http/http_ingress.hpp"

namespace kvr {
namespace {

ingress_actor::behavior_type ingress_behavior(ingress_actor::pointer, http_ingress* ingress) {
  return {
      [ingress](const std::shared_ptr<const routing_table>& table) {
        ingress->set_routing_table(table);
        return true;
      },
      [ingress](stop_atom) { ingress->stop(); },
  };
}

}  // namespace

ingress_actor spawn_ingress_actor(caf::actor_system& system, http_ingress& ingress) {
  return system.spawn<caf::detached>(ingress_behavior, &ingress);
}

}  // namespace kvr
