#include "core/routing/selector/selector.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>
#include <limits>

namespace kvr {
namespace {

/// The lowest `score` among candidates; ties resolved uniformly at random (reservoir sampling).
template <class Score>
selection pick_lowest(std::span<const worker_candidate> candidates, selector_rng& rng, Score score) {
  selection best{0, candidates[0].worker, score(candidates[0])};
  std::uint64_t ties = 1;
  for (std::size_t i = 1; i < candidates.size(); ++i) {
    const double value = score(candidates[i]);
    if (value < best.cost) {
      best = {i, candidates[i].worker, value};
      ties = 1;
    } else if (value == best.cost && std::uniform_int_distribution<std::uint64_t>(0, ties++)(rng) == 0) {
      best = {i, candidates[i].worker, value};
    }
  }
  return best;
}

/// Samples index i with probability proportional to exp(-normalized_cost_i / temperature).
/// Costs are computed once into a stack buffer (heap only beyond 512 candidates).
template <class Score>
selection sample_softmax(std::span<const worker_candidate> candidates, double temperature, selector_rng& rng,
                         Score score) {
  std::array<double, 512> stack_buffer;
  std::vector<double> heap_buffer;
  std::span<double> costs(stack_buffer.data(), std::min(candidates.size(), stack_buffer.size()));
  if (candidates.size() > stack_buffer.size()) {
    heap_buffer.resize(candidates.size());
    costs = heap_buffer;
  }
  double lowest = std::numeric_limits<double>::infinity();
  double highest = -lowest;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    costs[i] = score(candidates[i]);
    lowest = std::min(lowest, costs[i]);
    highest = std::max(highest, costs[i]);
  }
  const double range = highest - lowest;
  double total = 0;
  for (double& c : costs) {
    const double cost = c;
    c = range > 0 ? std::exp(-((cost - lowest) / range) / temperature) : 1.0;  // now a weight
    total += c;
  }
  double target = std::uniform_real_distribution<double>(0.0, total)(rng);
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    target -= costs[i];
    if (target < 0 || i + 1 == candidates.size()) return {i, candidates[i].worker, score(candidates[i])};
  }
  return {};  // unreachable: the loop returns on its last candidate
}

std::size_t uniform_index(std::size_t size, selector_rng& rng) {
  return std::uniform_int_distribution<std::size_t>(0, size - 1)(rng);
}

}  // namespace

std::optional<double> comparable_cost(const worker_candidate& candidate, const router_config& config,
                                      std::uint32_t prompt_tokens) {
  switch (config.mode) {
    case router_mode::kv:
      return kv_cost(candidate, {prompt_tokens, config.block_size, config.overlap_score_credit, config.prefill_load_scale,
                                 config.eviction_weight, config.engine_queue_weight, config.tier_weights.gpu});
    case router_mode::power_of_two:
    case router_mode::least_loaded: return booked_load(candidate, config.block_size);
    case router_mode::round_robin:
    case router_mode::random: return std::nullopt;
  }
  return std::nullopt;
}

std::optional<selection> select_worker(std::span<const worker_candidate> candidates, const router_config& config,
                                       const selection_request& request, selector_rng& rng) {
  if (candidates.empty()) return std::nullopt;
  auto load = [&](const worker_candidate& c) { return booked_load(c, config.block_size); };

  switch (config.mode) {
    case router_mode::kv: {
      const cost_params params{request.prompt_tokens, config.block_size, config.overlap_score_credit,
                               config.prefill_load_scale, config.eviction_weight, config.engine_queue_weight,
                               config.tier_weights.gpu};
      auto cost = [&](const worker_candidate& c) { return kv_cost(c, params); };
      if (config.router_temperature > 0) return sample_softmax(candidates, config.router_temperature, rng, cost);
      return pick_lowest(candidates, rng, cost);
    }
    case router_mode::round_robin: {
      const std::size_t i = request.round_robin_ticket % candidates.size();
      return selection{i, candidates[i].worker, 0.0};
    }
    case router_mode::random: {
      const std::size_t i = uniform_index(candidates.size(), rng);
      return selection{i, candidates[i].worker, 0.0};
    }
    case router_mode::power_of_two: {
      if (candidates.size() == 1) return selection{0, candidates[0].worker, load(candidates[0])};
      const std::size_t first = uniform_index(candidates.size(), rng);
      std::size_t second = uniform_index(candidates.size() - 1, rng);
      if (second >= first) ++second;  // two distinct picks
      const std::size_t pair[2] = {first, second};
      const worker_candidate both[2] = {candidates[first], candidates[second]};
      const selection winner = pick_lowest(std::span<const worker_candidate>(both), rng, load);
      return selection{pair[winner.candidate], winner.worker, winner.cost};
    }
    case router_mode::least_loaded:
      return pick_lowest(candidates, rng, load);
  }
  return std::nullopt;
}

}  // namespace kvr
