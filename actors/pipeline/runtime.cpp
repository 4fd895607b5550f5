#include "actors/pipeline/runtime.hpp"

#include <chrono>

#include "messages/type_ids.hpp"

namespace kvr {

void configure_actor_system(caf::actor_system_config& config, std::size_t threads) {
  config.add_message_types<caf::id_block::kvr>();
  config.set("scheduler.max-threads", threads);
  // CAF 0.17's defaults poll 100 times aggressively, then 500 times with 50 us sleeps before
  // an idle worker blocks: at a few thousand messages per second that is a busy core.
  config.set("work-stealing.aggressive-poll-attempts", 10);
  config.set("work-stealing.moderate-poll-attempts", 10);
  config.set("work-stealing.moderate-sleep-duration", caf::timespan{std::chrono::microseconds(50)});
}

}  // namespace kvr
