#pragma once
/// What a worker set will actually do with each kind of prompt, in one line, and a warning for
/// each path that routes on less than the config asks for (a kv set without a tokenizer routes
/// text on load alone). Printed when a set starts, so an operator reads what happens rather
/// than what was meant.

#include <cstddef>
#include <string>
#include <vector>

#include "core/config/router_config.hpp"
#include "core/prompt/prompt_plan.hpp"

namespace kvr {

struct set_facts {
  std::string name;
  router_config config;          ///< the set's effective config
  prompt_capabilities prompts;   ///< what its hashers can hash (none where there are none)
  std::size_t workers = 0;
  std::size_t kv_publishers = 0;  ///< KV-event streams subscribed
};

struct set_summary {
  std::string line;                   ///< e.g. "worker set m: 2 worker(s), kv: token ids, text and chats hashed; ..."
  std::vector<std::string> warnings;  ///< one per degraded path, each naming the fix
};

[[nodiscard]] set_summary summarize_set(const set_facts& facts);

}  // namespace kvr
