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
  // One queue for every worker, each idle worker blocked on its condition variable until a job
  // comes (CAF's work-sharing policy). Work stealing, CAF's default, gives every worker a queue
  // of its own and spreads jobs from outside CAF (the I/O threads) over them in turn: a job put
  // behind a busy worker waits there while an idle one sleeps, woken only by its own queue or
  // every 10 ms to steal (polling more often costs a context switch per poll in a VM). With one
  // queue, requests no longer wait behind another's tokenizing: kv chats on two cores went 8%
  // faster, token-id completions on one actor thread 15-30% (docs/benchmarks.md, "The scheduler").
  config.set("scheduler.policy", caf::atom("sharing"));
}

std::size_t usable_cores() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) return std::max(1, CPU_COUNT(&allowed));
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace kvr
