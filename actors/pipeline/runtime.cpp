#include "actors/pipeline/runtime.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "messages/type_ids.hpp"

namespace kvr {

void configure_actor_system(caf::actor_system_config& config, std::size_t threads) {
  config.add_message_types<caf::id_block::kvr>();
  config.set("scheduler.max-threads", threads);
  // CAF 0.17's defaults poll 100 times aggressively, then 500 times with 50 us sleeps before
  // an idle worker blocks: at a few thousand messages per second that is a busy core. Each of
  // those sleeps is a context switch, dear in a VM: a worker with nothing to do polls ten times
  // and then waits on its condition variable (woken by the next job). At 200 requests/s this
  // took the kv router from 1900 to 1300 CPU-us per request (docs/benchmarks.md).
  config.set("work-stealing.aggressive-poll-attempts", 10);
  config.set("work-stealing.moderate-poll-attempts", 0);
}

std::size_t usable_cores() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) return std::max(1, CPU_COUNT(&allowed));
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace kvr
