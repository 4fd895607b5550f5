#pragma once
/// Picks a worker for one request under any router mode. Side-effect free: the caller books the
/// load on the chosen worker as a separate step, and advances the round-robin ticket.

#include <cstdint>
#include <optional>
#include <random>
#include <span>

#include "core/config/router_config.hpp"
#include "core/routing/selector/cost.hpp"

namespace kvr {

/// The injected source of randomness (seeded in tests, per-actor in the router).
using selector_rng = std::mt19937_64;

struct selection_request {
  std::uint32_t prompt_tokens = 0;
  /// Round-robin position: the caller passes a counter it increments once per routed request.
  std::uint64_t round_robin_ticket = 0;
};

struct selection {
  std::size_t candidate = 0;  ///< index into the candidates span
  worker_id worker = 0;
  double cost = 0.0;          ///< kv cost (kv mode) or booked load (load-only modes); 0 otherwise
};

/// What the mode's pick compares for `candidate`: the kv cost (kv mode) or the booked load in
/// blocks (power-of-two, least-loaded); none for round-robin and random, which compare nothing.
[[nodiscard]] std::optional<double> comparable_cost(const worker_candidate& candidate, const router_config& config,
                                                    std::uint32_t prompt_tokens);

/// Chooses among `candidates` (healthy workers only; the caller filters). Empty candidates ->
/// nullopt. kv mode: temperature 0 = lowest cost with a random tie-break, temperature t > 0 =
/// sample from softmax(-normalized cost / t), costs normalized to [0, 1] by min and max.
[[nodiscard]] std::optional<selection> select_worker(std::span<const worker_candidate> candidates,
                                                     const router_config& config, const selection_request& request,
                                                     selector_rng& rng);

}  // namespace kvr
