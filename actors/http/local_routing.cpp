#include "actors/http/local_routing.hpp"

#include <algorithm>

namespace kvr {

std::optional<std::uint32_t> local_router::pick(const worker_set_route& set, std::span<const std::uint32_t> excluded) {
  const auto snapshot = set.snapshot->load();
  // Workers the scorer last saw busy (their engines report waiting requests) are passed over
  // while another worker is free; when all are busy, every routable one stays a candidate.
  for (const bool skip_busy : {true, false}) {
    candidates_.clear();
    for (std::uint32_t w = 0; w < set.workers.size(); ++w) {
      const bool known = w < snapshot->workers.size();
      const bool healthy = !known || snapshot->workers[w].healthy;
      const bool busy = known && snapshot->workers[w].busy;
      if (healthy && !(skip_busy && busy) && std::find(excluded.begin(), excluded.end(), w) == excluded.end())
        candidates_.push_back(worker_candidate{.worker = w});
    }
    if (!candidates_.empty()) break;
  }
  if (candidates_.empty()) return std::nullopt;
  // The ticket advances only for round-robin; random ignores it.
  const std::uint64_t ticket = set.config.mode == router_mode::round_robin ? set.round_robin_ticket->fetch_add(1) : 0;
  auto chosen = select_worker(candidates_, set.config, {.prompt_tokens = 0, .round_robin_ticket = ticket}, rng_);
  if (!chosen) return std::nullopt;
  return chosen->worker;
}

bool lifecycle_reporter::add(const scorer_actor& scorer, const lifecycle_event& event) {
  auto it = std::find_if(pending_.begin(), pending_.end(), [&](const per_scorer& p) { return p.scorer == scorer; });
  if (it == pending_.end()) it = pending_.insert(pending_.end(), per_scorer{scorer, {}});
  it->events.push_back(event);
  return queued_++ == 0;
}

void lifecycle_reporter::flush() {
  for (per_scorer& p : pending_)
    if (!p.events.empty())
      caf::anon_send(p.scorer, std::make_shared<const std::vector<lifecycle_event>>(std::exchange(p.events, {})));
  // Sets that left the routing table must not keep their scorers alive here.
  pending_.clear();
  queued_ = 0;
}

}  // namespace kvr
