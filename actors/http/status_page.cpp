#include "actors/http/status_page.hpp"

#include "actors/http/set_metrics.hpp"

#include <nlohmann/json.hpp>

namespace kvr {
namespace {

nlohmann::json optional_json(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

std::uint64_t queue_depth(const scorer_snapshot_cell& cell) {
  std::uint64_t depth = 0;
  for (std::size_t c = 0; c < priority_classes; ++c) depth += cell.queue_depth(static_cast<request_priority>(c));
  return depth;
}

}  // namespace

void traffic_recorder::sample(const routing_table& table, double seconds) {
  std::lock_guard lock(mutex_);
  std::map<std::string, traffic_history> kept;
  for (const worker_set_route& set : table.sets) {
    const auto snapshot = set.snapshot->load();
    auto it = sets_.find(set.name);
    traffic_history history = it == sets_.end() ? traffic_history(samples_kept) : std::move(it->second);
    history.record({.seconds = seconds,
                    .requests = snapshot->routed,
                    .prompt_blocks = snapshot->prompt_blocks_routed,
                    .overlap_blocks = snapshot->overlap_blocks_routed});
    kept.emplace(set.name, std::move(history));
  }
  sets_ = std::move(kept);
}

std::string traffic_recorder::status_json(const routing_table& table, double seconds) const {
  nlohmann::json sets = nlohmann::json::array();
  std::lock_guard lock(mutex_);
  for (const worker_set_route& set : table.sets) {
    const auto snapshot = set.snapshot->load();
    nlohmann::json workers = nlohmann::json::array();
    for (std::size_t w = 0; w < snapshot->workers.size(); ++w) {
      const auto& worker = snapshot->workers[w];
      workers.push_back(live_worker_json(worker, w < set.workers.size() ? set.workers[w].url : std::string()));
    }
    nlohmann::json history = nlohmann::json::array();
    if (auto it = sets_.find(set.name); it != sets_.end())
      for (const traffic_rate& rate : it->second.rates())
        history.push_back({{"t", rate.seconds - seconds}, {"rps", rate.requests_per_second}, {"hit_rate", optional_json(rate.hit_rate)}});
    const std::uint64_t blocks = snapshot->prompt_blocks_routed;
    sets.push_back({{"name", set.name},
                    {"model", set.model},
                    {"router_mode", std::string(to_string(set.config.mode))},
                    {"scores_overlap", uses_prefix_overlap(set.config)},
                    {"routed", snapshot->routed},
                    {"hit_rate", blocks ? nlohmann::json(double(snapshot->overlap_blocks_routed) / double(blocks)) : nlohmann::json(nullptr)},
                    {"index_blocks", snapshot->index_blocks},
                    {"queue_enabled", snapshot->admission.enabled},
                    {"queue_depth", queue_depth(*set.snapshot)},
                    {"workers", std::move(workers)},
                    {"history", std::move(history)}});
  }
  return nlohmann::json{{"uptime_s", seconds}, {"sample_period_s", sample_period_seconds}, {"sets", std::move(sets)}}.dump();
}

}  // namespace kvr
