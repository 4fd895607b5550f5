#include "core/routing/set_summary.hpp"

#include <fmt/format.h>

namespace kvr {
namespace {

std::string join(const std::vector<std::string>& parts, std::string_view separator, std::string_view last_separator) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += i + 1 == parts.size() ? last_separator : separator;
    out += parts[i];
  }
  return out;
}

/// Which prompts are hashed into blocks, and which fall back to load.
void describe_hashing(const set_facts& f, std::vector<std::string>& parts, std::vector<std::string>& warnings) {
  std::vector<std::string> hashed{"token ids"};
  std::vector<std::string> on_load;
  (f.prompts.tokenizer ? hashed : on_load).push_back("text");
  (f.prompts.chat ? hashed : on_load).push_back("chats");
  if (f.prompts.images) hashed.push_back("images");
  parts.push_back(join(hashed, ", ", " and ") + " hashed");
  if (!on_load.empty()) parts.push_back(join(on_load, ", ", " and ") + ": routed on load (no " +
                                        (f.prompts.tokenizer ? "chat template" : "tokenizer") + ")");
  if (!f.prompts.tokenizer)
    warnings.push_back(fmt::format("worker set {}: text and chat prompts route on load alone: no tokenizer (give "
                                   "--tokenizer, or the card's tokenizer, a tokenizer.json or a model directory)",
                                   f.name));
  else if (!f.prompts.chat)
    warnings.push_back(fmt::format("worker set {}: chat prompts route on load alone: no chat template (give "
                                   "--tokenizer-config, or the card's tokenizer_config, a tokenizer_config.json, a .jinja "
                                   "file or a model directory)",
                                   f.name));
}

void describe_index(const set_facts& f, std::vector<std::string>& parts, std::vector<std::string>& warnings) {
  if (!f.config.use_kv_events) {
    parts.push_back("index predicted from routing decisions (approximate mode)");
    return;
  }
  if (f.kv_publishers > 0) {
    parts.push_back(fmt::format("index from the KV events of {} publisher(s)", f.kv_publishers));
    return;
  }
  parts.push_back("no KV events: overlap stays 0");
  warnings.push_back(fmt::format("worker set {} scores KV events, but no worker has a kv_events= endpoint; overlap stays 0 "
                                 "(add kv_events=, or use --no-kv-events for approximate mode)",
                                 f.name));
}

std::string describe_admission(const router_config& c) {
  if (!queues_when_busy(c)) return "no queue";
  return fmt::format("queue while every worker has over {} x {} booked prefill tokens (up to {}, {} s)", c.busy_threshold,
                     c.max_num_batched_tokens, c.queue_size, c.queue_timeout_secs);
}

}  // namespace

set_summary summarize_set(const set_facts& f) {
  set_summary summary;
  std::vector<std::string> parts;
  const router_config& c = f.config;
  if (uses_prefix_overlap(c)) {
    describe_hashing(f, parts, summary.warnings);
    describe_index(f, parts, summary.warnings);
  } else if (c.mode == router_mode::round_robin || c.mode == router_mode::random) {
    parts.push_back("prompts not read");
  } else {
    parts.push_back(c.mode == router_mode::kv ? "routed on load alone (overlap credit 0)" : "routed on booked load");
    parts.push_back("prompt lengths estimated from their bytes (token ids exact)");
  }
  parts.push_back(describe_admission(c));
  summary.line = fmt::format("worker set {}: {} worker(s), {}: {}", f.name, f.workers, to_string(c.mode), join(parts, "; ", "; "));
  return summary;
}

}  // namespace kvr
