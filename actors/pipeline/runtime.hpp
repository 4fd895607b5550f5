#pragma once
/// Settings of kvrouter's CAF actor system (CAF 0.17.6), in one place for every binary.

#include <cstddef>

#include <caf/actor_system_config.hpp>

namespace kvr {

/// Registers kvrouter's message types and sizes the scheduler: `threads` workers (0.17 would
/// otherwise start max(4, cores)) sharing one queue, an idle worker asleep until a job comes, so
/// that any free worker takes the next job and a steady trickle of messages (KV events,
/// requests) does not keep a core busy polling.
void configure_actor_system(caf::actor_system_config& config, std::size_t threads);

/// The cores this process may run on: its CPU affinity (`taskset`, a container's cpuset), not
/// every core the machine has, which std::thread::hardware_concurrency counts. Thread-count
/// defaults (I/O threads, actor threads, hashers, KV decoders) size from this.
[[nodiscard]] std::size_t usable_cores();

}  // namespace kvr
