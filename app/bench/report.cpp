#include "app/bench/report.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kvr::bench {

policy_report summarize_run(std::string policy, std::vector<request_result>& results, double wall_s) {
  policy_report r;
  r.policy = std::move(policy);
  r.requests = results.size();
  r.wall_s = wall_s;
  std::vector<double> itl;
  std::size_t tokens = 0;
  for (const request_result& result : results) {
    r.resent += result.resent;
    if (!result.ok) {
      ++r.errors;
      r.refused += result.status == 429;
      if (r.first_error.empty()) r.first_error = result.error;
      continue;
    }
    r.ttft_samples.push_back(result.ttft_ms);
    itl.insert(itl.end(), result.itl_ms.begin(), result.itl_ms.end());
    tokens += result.output_chunks;
  }
  const std::size_t ok = r.requests - r.errors;
  r.rps = wall_s > 0 ? static_cast<double>(ok) / wall_s : 0;
  r.output_tokens_per_s = wall_s > 0 ? static_cast<double>(tokens) / wall_s : 0;
  r.ttft_ms = loadgen::summarize(r.ttft_samples);
  r.itl_ms = loadgen::summarize(itl);
  return r;
}

void print_table(const std::vector<policy_report>& reports) {
  const bool sweep = !reports.empty() && reports.front().offered_rate > 0;
  std::size_t width = 13;  // "kv 2P+2D vllm-nixl" and the like are wider
  for (const policy_report& r : reports) width = std::max(width, r.policy.size());
  std::cout << fmt::format("\n{:<{}} {}{:>8} {:>6} {:>6} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}\n", "policy", width,
                           sweep ? fmt::format("{:>8} ", "offered") : "", "requests", "errors", "429", "req/s", "hit rate",
                           "TTFT avg", "TTFT p50", "TTFT p99", "ITL avg", "ITL p50", "ITL p99", "CPU us/req");
  for (const policy_report& r : reports) {
    std::cout << fmt::format("{:<{}} {}{:>8} {:>6} {:>6} {:>8.1f} {:>9} {:>7.1f}ms {:>7.1f}ms {:>7.1f}ms {:>7.2f}ms {:>7.2f}ms {:>7.2f}ms {:>10}\n",
                             r.policy, width, sweep ? fmt::format("{:>8.1f} ", r.offered_rate) : "", r.requests, r.errors, r.refused,
                             r.rps, r.hit_rate < 0 ? std::string("-") : fmt::format("{:.1f}%", 100 * r.hit_rate), r.ttft_ms.mean,
                             r.ttft_ms.p50, r.ttft_ms.p99, r.itl_ms.mean, r.itl_ms.p50, r.itl_ms.p99,
                             r.router_cpu_us_per_req < 0 ? std::string("-") : fmt::format("{:.0f}", r.router_cpu_us_per_req));
    if (const replication_report& rep = r.replication; rep.replicas > 1) {
      auto shown = [](double v, std::string_view unit) { return v < 0 ? std::string("-") : fmt::format("{:.2f}{}", v, unit); };
      std::cout << fmt::format("    {} routers, sync {}: load imbalance (CV) {}, replica disagreement {}, sync lag p50 {} p99 {}, "
                               "NATS {}\n",
                               rep.replicas, rep.sync ? "on" : "off",
                               shown(rep.load_cv, ""), rep.disagreement < 0 ? std::string("-") : fmt::format("{:.1f}% of the load", 100 * rep.disagreement), shown(rep.lag_p50_ms, " ms"),
                               shown(rep.lag_p99_ms, " ms"),
                               rep.nats_messages_per_s < 0 ? std::string("-") : fmt::format("{:.0f} msg/s", rep.nats_messages_per_s));
    }
    if (r.dims_cache_hit_rate >= 0)
      std::cout << fmt::format("    image-dimension cache hit rate: {:.1f}%\n", 100 * r.dims_cache_hit_rate);
    if (r.resent > 0)
      std::cout << fmt::format("    resent on a new connection: {} (the router had closed the kept-alive one before answering)\n", r.resent);
    if (!r.first_error.empty()) std::cout << "    first error: " << r.first_error << "\n";
  }
}

void write_json(const std::vector<policy_report>& reports, const std::string& path, const std::string& workload) {
  nlohmann::json out = nlohmann::json::array();
  for (const policy_report& r : reports) {
    auto optional = [](double v) { return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(v); };
    out.push_back({{"policy", r.policy},
                   {"workload", workload},
                   {"offered_rate", r.offered_rate > 0 ? nlohmann::json(r.offered_rate) : nlohmann::json(nullptr)},
                   {"requests", r.requests},
                   {"errors", r.errors},
                   {"refused", r.refused},
                   {"wall_s", r.wall_s},
                   {"rps", r.rps},
                   {"output_tokens_per_s", r.output_tokens_per_s},
                   {"hit_rate", optional(r.hit_rate)},
                   {"ttft_mean_ms", r.ttft_ms.mean},
                   {"ttft_p50_ms", r.ttft_ms.p50},
                   {"ttft_p90_ms", r.ttft_ms.p90},
                   {"ttft_p99_ms", r.ttft_ms.p99},
                   {"itl_mean_ms", r.itl_ms.mean},
                   {"itl_p50_ms", r.itl_ms.p50},
                   {"itl_p90_ms", r.itl_ms.p90},
                   {"itl_p99_ms", r.itl_ms.p99},
                   {"router_cpu_us_per_req", optional(r.router_cpu_us_per_req)},
                   {"dims_cache_hit_rate", optional(r.dims_cache_hit_rate)},
                   {"replicas", r.replication.replicas},
                   {"replica_sync", r.replication.sync},
                   {"load_imbalance_cv", optional(r.replication.load_cv)},
                   {"replica_disagreement", optional(r.replication.disagreement)},
                   {"sync_lag_p50_ms", optional(r.replication.lag_p50_ms)},
                   {"sync_lag_p99_ms", optional(r.replication.lag_p99_ms)},
                   {"nats_messages_per_s", optional(r.replication.nats_messages_per_s)},
                   {"resent", r.resent},
                   {"first_error", r.first_error}});
  }
  std::ofstream(path) << out.dump(2) << "\n";
}

void write_csv(const std::vector<policy_report>& reports, const std::string& path) {
  std::ofstream out(path);
  out << "policy,offered_rate,requests,errors,refused,wall_s,rps,output_tokens_per_s,hit_rate,ttft_mean_ms,ttft_p50_ms,ttft_p90_ms,ttft_p99_ms,"
         "itl_mean_ms,itl_p50_ms,itl_p90_ms,itl_p99_ms,router_cpu_us_per_req,dims_cache_hit_rate\n";
  for (const policy_report& r : reports)
    out << fmt::format("{},{},{},{},{},{:.3f},{:.3f},{:.1f},{},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{},{}\n", r.policy,
                       r.offered_rate > 0 ? fmt::format("{:.3f}", r.offered_rate) : std::string(), r.requests, r.errors,
                       r.refused, r.wall_s, r.rps, r.output_tokens_per_s,
                       r.hit_rate < 0 ? std::string() : fmt::format("{:.4f}", r.hit_rate), r.ttft_ms.mean, r.ttft_ms.p50,
                       r.ttft_ms.p90, r.ttft_ms.p99, r.itl_ms.mean, r.itl_ms.p50, r.itl_ms.p90, r.itl_ms.p99,
                       r.router_cpu_us_per_req < 0 ? std::string() : fmt::format("{:.1f}", r.router_cpu_us_per_req),
                       r.dims_cache_hit_rate < 0 ? std::string() : fmt::format("{:.4f}", r.dims_cache_hit_rate));
}

namespace {

/// The distinct policies of `reports`, in order of first appearance.
std::vector<std::string> policies_of(const std::vector<policy_report>& reports) {
  std::vector<std::string> names;
  for (const policy_report& r : reports)
    if (std::find(names.begin(), names.end(), r.policy) == names.end()) names.push_back(r.policy);
  return names;
}

std::string cdf_script(const std::vector<policy_report>& reports, const std::string& workload) {
  std::string script = fmt::format("set title 'Time to first token per policy: {}'\nset xlabel 'TTFT (ms)'\n"
                                   "set ylabel 'share of requests'\nset logscale x\nset grid\nset key bottom right\n",
                                   workload);
  std::string plot = "plot ";
  for (std::size_t i = 0; i < reports.size(); ++i) {
    script += fmt::format("$p{} << EOD\n", i);
    const auto& samples = reports[i].ttft_samples;
    for (std::size_t k = 0; k < samples.size(); ++k)
      script += fmt::format("{:.3f} {:.5f}\n", std::max(samples[k], 0.001), static_cast<double>(k + 1) / samples.size());
    script += "EOD\n";
    // Each policy its own dash pattern and width: equal curves stay visible on top of each other.
    plot += fmt::format("{}$p{} using 1:2 with lines linewidth {} dashtype {} title '{}'", i > 0 ? ", " : "", i,
                        2 + (reports.size() - 1 - i), i + 1, reports[i].policy);
  }
  return script + plot + "\n";
}

std::string sweep_script(const std::vector<policy_report>& reports, const std::string& workload) {
  const auto names = policies_of(reports);
  std::string script;
  for (std::size_t p = 0; p < names.size(); ++p) {
    script += fmt::format("$s{} << EOD\n", p);
    for (const policy_report& r : reports)
      if (r.policy == names[p])
        script += fmt::format("{:.3f} {:.3f} {:.3f} {:.3f}\n", r.offered_rate, std::max(r.ttft_ms.p50, 0.001),
                              std::max(r.ttft_ms.p99, 0.001), r.rps);
    script += "EOD\n";
  }
  script += fmt::format("set multiplot layout 1,2 title 'Rate sweep: {}'\nset grid\nset key top left\n", workload);
  script += "set xlabel 'offered load (requests/s)'\nset ylabel 'TTFT (ms)'\nset logscale y\nplot ";
  for (std::size_t p = 0; p < names.size(); ++p)
    script += fmt::format("{}$s{} using 1:2 with linespoints linewidth 2 dashtype {} title '{} p50', "
                          "$s{} using 1:3 with linespoints linewidth 1 dashtype {} title '{} p99'",
                          p > 0 ? ", " : "", p, p + 1, names[p], p, p + 1, names[p]);
  script += "\nunset logscale y\nset ylabel 'goodput (successful requests/s)'\nplot ";
  for (std::size_t p = 0; p < names.size(); ++p)
    script += fmt::format("{}$s{} using 1:4 with linespoints linewidth 2 dashtype {} title '{}'", p > 0 ? ", " : "", p, p + 1,
                          names[p]);
  script += "\n";
  return script + "unset multiplot\n";
}

}  // namespace

bool write_plot(const std::vector<policy_report>& reports, const std::string& path, const std::string& workload) {
  const bool sweep = !reports.empty() && reports.front().offered_rate > 0;
  std::string script = fmt::format("set terminal pngcairo size {},560 noenhanced\nset output '{}'\n", sweep ? 1400 : 900, path);
  script += sweep ? sweep_script(reports, workload) : cdf_script(reports, workload);
  FILE* gnuplot = popen("gnuplot 2>&1", "w");
  if (gnuplot == nullptr) {
    std::cerr << "kvrouter-bench: cannot run gnuplot (apt install gnuplot-nox)\n";
    return false;
  }
  std::fputs(script.c_str(), gnuplot);
  const int status = pclose(gnuplot);
  if (status != 0) std::cerr << "kvrouter-bench: gnuplot failed; the plot " << path << " may be missing\n";
  return status == 0;
}

}  // namespace kvr::bench
