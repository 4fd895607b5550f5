#include "app/bench/simulate.hpp"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <stdexcept>

#include <fmt/format.h>

#include "app/bench/cluster.hpp"
#include "core/sim/cluster_sim.hpp"

namespace kvr::bench {
namespace {

/// `--name V` and `--name=V` pairs, in order.
std::vector<std::pair<std::string, std::string>> flag_pairs(const std::vector<std::string>& flags, const char* whose) {
  std::vector<std::pair<std::string, std::string>> out;
  for (std::size_t i = 0; i < flags.size(); ++i) {
    const std::string& flag = flags[i];
    if (!flag.starts_with("--")) throw std::runtime_error(fmt::format("{} flag {}: expected --NAME VALUE", whose, flag));
    if (const auto eq = flag.find('='); eq != std::string::npos) {
      out.emplace_back(flag.substr(0, eq), flag.substr(eq + 1));
    } else if (flag == "--no-kv-events" || flag == "--load-aware") {
      out.emplace_back(flag, "");
    } else {
      if (i + 1 >= flags.size()) throw std::runtime_error(fmt::format("{} flag {} lacks its value", whose, flag));
      out.emplace_back(flag, flags[++i]);
    }
  }
  return out;
}

double number(const std::string& flag, const std::string& value) {
  std::size_t used = 0;
  double n = 0;
  try {
    n = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || n < 0) throw std::runtime_error(fmt::format("mocker flag {}: {} is not a number >= 0", flag, value));
  return n;
}

}  // namespace

mocker::engine_settings engine_model(const std::vector<std::string>& flags, bool strict) {
  mocker::engine_settings e;
  for (const auto& [flag, value] : flag_pairs(flags, "mocker")) {
    static constexpr const char* modelled[] = {"--num-blocks", "--block-size", "--max-num-seqs", "--max-num-batched-tokens",
                                               "--speedup", "--prefill-us-per-token", "--step-base-us", "--decode-us-per-seq"};
    if (!strict && std::find(std::begin(modelled), std::end(modelled), flag) == std::end(modelled)) continue;
    const double n = number(flag, value);
    if (flag == "--num-blocks") e.num_blocks = static_cast<std::uint32_t>(n);
    else if (flag == "--block-size") e.block_size = static_cast<std::uint32_t>(n);
    else if (flag == "--max-num-seqs") e.max_num_seqs = static_cast<std::uint32_t>(n);
    else if (flag == "--max-num-batched-tokens") e.max_num_batched_tokens = static_cast<std::uint32_t>(n);
    else if (flag == "--speedup") e.timing.speedup = n;
    else if (flag == "--prefill-us-per-token") e.timing.prefill_us_per_token = n;
    else if (flag == "--step-base-us") e.timing.step_base_us = n;
    else if (flag == "--decode-us-per-seq") e.timing.decode_us_per_sequence = n;
    else throw std::runtime_error(fmt::format("simulate does not model mocker flag {}", flag));
  }
  if (e.num_blocks == 0 || e.block_size == 0 || e.max_num_seqs == 0 || e.timing.speedup <= 0)
    throw std::runtime_error("mocker flags: blocks, block size, sequences and speedup must be positive");
  return e;
}

namespace {

/// The set's config for `policy` (compare's policy_flags) and the router flags, as kvrouter
/// would read them: `--NAME V` sets the knob NAME (with `_` for `-`).
router_config router_from(const std::string& policy, const std::vector<std::string>& router_flags) {
  std::vector<std::string> flags = policy_flags(policy);
  if (flags.empty()) throw std::runtime_error("unknown policy " + policy);
  flags.insert(flags.end(), router_flags.begin(), router_flags.end());
  router_config config;
  for (const auto& [flag, value] : flag_pairs(flags, "router")) {
    if (flag == "--no-kv-events") {
      config.use_kv_events = false;
    } else if (flag == "--load-aware") {
      config = load_aware_preset(config);
    } else {
      std::string knob = flag.substr(2);
      for (char& c : knob) c = c == '-' ? '_' : c;
      if (auto set = set_knob(config, knob, value); !set)
        throw std::runtime_error(fmt::format("router flag {}: {}", flag, set.error().message));
    }
  }
  if (auto valid = validate(config); !valid) throw std::runtime_error(valid.error().message);
  return config;
}

}  // namespace

std::vector<policy_report> simulate_policies(const simulate_settings& settings, const std::vector<loadgen::request_spec>& requests) {
  for (const auto& r : requests)
    if (!r.messages_json.empty()) throw std::runtime_error("simulate replays token-id prompts; chat workloads need compare");
  const mocker::engine_settings engine = engine_model(settings.mocker_flags, true);
  std::vector<policy_report> reports;
  for (const std::string& policy : settings.policies) {
    sim::cluster_settings cluster;
    cluster.engines = static_cast<std::uint32_t>(settings.engines);
    cluster.engine = engine;
    cluster.router = router_from(policy, settings.router_flags);
    cluster.kv_event_delay_us = settings.kv_event_delay_ms * 1000;
    cluster.request_latency_us = settings.request_latency_ms * 1000;
    const auto started = std::chrono::steady_clock::now();
    const sim::cluster_result run = sim::simulate(requests, cluster);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::vector<request_result> results;
    results.reserve(run.requests.size());
    for (const sim::request_outcome& r : run.requests) {
      request_result out;
      out.ok = r.ok && r.first_token_us >= 0;
      out.status = out.ok ? 200 : 500;
      out.ttft_ms = (r.first_token_us - r.arrival_us) / 1000;
      out.latency_ms = (r.finished_us - r.arrival_us) / 1000;
      for (double gap : r.itl_us) out.itl_ms.push_back(gap / 1000);
      out.output_chunks = r.output_tokens;
      if (!out.ok) out.error = "the simulated engine refused it";
      results.push_back(std::move(out));
    }
    const double first_arrival = requests.empty() ? 0 : requests.front().arrival_s;
    policy_report report = summarize_run(policy, results, std::max(1e-9, run.end_us / 1e6 - first_arrival));
    if (run.prompt_tokens > 0) report.hit_rate = static_cast<double>(run.hit_tokens) / static_cast<double>(run.prompt_tokens);
    std::cerr << fmt::format("kvrouter-bench: simulated {} ({} requests, {} engine steps) in {:.2f} s\n", policy, run.requests.size(),
                             run.steps, took);
    reports.push_back(std::move(report));
  }
  return reports;
}

}  // namespace kvr::bench
