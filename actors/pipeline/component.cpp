#include "actors/pipeline/component.hpp"

#include <pthread.h>

#include <caf/all.hpp>

#include "messages/type_ids.hpp"

namespace kvr {
namespace {

/// How long one step may wait for I/O: the latency of the driver's mailbox (an exit takes
/// effect within it), never of the component's own I/O, which a step handles as it comes.
constexpr std::chrono::milliseconds step_budget{50};

/// The component lives in the driver's state, which CAF destroys when the driver terminates:
/// a stopped driver lets go of its sockets at once (an undrained SUB socket would otherwise
/// keep queueing what its engine publishes).
struct driver_state {
  std::shared_ptr<pollable_component> component;
};

caf::behavior driver(caf::stateful_actor<driver_state>* self, std::shared_ptr<pollable_component> component,
                     std::string thread_name) {
  pthread_setname_np(pthread_self(), thread_name.substr(0, 15).c_str());
  self->state.component = std::move(component);
  self->send(self, tick_atom_v);
  return {
      [self](tick_atom) {
        try {
          self->state.component->poll_for(step_budget);
        } catch (const std::exception& e) {
          return self->quit(caf::make_error(caf::sec::runtime_error, e.what()));
        }
        self->send(self, tick_atom_v);
      },
  };
}

}  // namespace

caf::actor spawn_component_driver(caf::actor_system& system, std::shared_ptr<pollable_component> component,
                                  std::string thread_name) {
  return system.spawn<caf::detached>(driver, std::move(component), std::move(thread_name));
}

}  // namespace kvr
