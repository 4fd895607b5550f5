#pragma once
/// The pipeline's components that block on sockets (the KV subscriber, the health checker, the
/// media fetcher), each driven by a detached CAF actor of its own: the actor runs one bounded
/// step of the component's I/O per message it sends itself, so between steps it reads its
/// mailbox (exit, supervision) like any actor. The watcher spawns and monitors these drivers;
/// a driver that dies (a step threw, or it was killed) is restarted with back-off.

#include <chrono>
#include <memory>
#include <string>

#include <caf/fwd.hpp>

namespace kvr {

class pollable_component {
 public:
  virtual ~pollable_component() = default;
  /// Does the component's pending I/O, waiting for some for at most `budget`. Throws on a
  /// failure the component cannot recover from (its driver then dies and is restarted).
  virtual void poll_for(std::chrono::milliseconds budget) = 0;
};

/// Spawns a detached actor that drives `component` until it exits; its thread is named
/// `thread_name` (visible in top -H and /proc). The actor keeps the component alive.
caf::actor spawn_component_driver(caf::actor_system& system, std::shared_ptr<pollable_component> component,
                                  std::string thread_name);

}  // namespace kvr
