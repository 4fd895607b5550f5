#include "app/bench/replica_probe.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/bench/cluster.hpp"

namespace kvr::bench {
namespace {

nlohmann::json sets_page(std::uint16_t port) {
  return nlohmann::json::parse(http_get(fmt::format("http://127.0.0.1:{}/v1/router/sets", port)), nullptr, false);
}

}  // namespace

replica_probe::replica_probe(std::vector<std::uint16_t> ports, bool sync) : ports_(std::move(ports)), sync_(sync) {
  sent_before_ = messages_sent();
  sampler_ = std::thread([this] {
    while (!stop_.load()) {
      sample();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

replica_probe::~replica_probe() {
  stop_ = true;
  if (sampler_.joinable()) sampler_.join();
}

void replica_probe::sample() {
  std::map<std::string, double> truth;                 // worker -> all replicas' own bookings
  std::map<std::string, std::vector<double>> seen;     // worker -> what each replica sees
  // Every replica at once: a sample taken one replica after another would see the load move.
  std::vector<nlohmann::json> pages(ports_.size());
  {
    std::vector<std::thread> readers;
    for (std::size_t i = 0; i < ports_.size(); ++i) readers.emplace_back([&, i] { pages[i] = sets_page(ports_[i]); });
    for (auto& r : readers) r.join();
  }
  for (const nlohmann::json& page : pages) {
    if (!page.is_object() || !page.contains("sets") || page["sets"].empty()) return;  // a torn sample: skip it
    for (const auto& w : page["sets"][0]["live"]["workers"]) {
      const std::string name = w.value("name", "");
      const double own = w.value("active_requests", 0.0);
      const double remote = w.contains("remote") ? w["remote"].value("active_requests", 0.0) : 0.0;
      truth[name] += own;
      seen[name].push_back(own + remote);
    }
  }
  if (truth.empty()) return;
  double sum = 0, squares = 0;
  for (const auto& [name, load] : truth) {
    sum += load;
    squares += load * load;
  }
  const double n = static_cast<double>(truth.size()), mean = sum / n;
  if (mean > 0) {
    cv_sum_ += std::sqrt(std::max(0.0, squares / n - mean * mean)) / mean;
    ++cv_samples_;
  }
  if (ports_.size() > 1 && sum > 0) {
    double error = 0;  // over replicas and workers: how far each replica's view is from the truth
    for (const auto& [name, views] : seen)
      for (double view : views) error += std::abs(view - truth[name]);
    spread_sum_ += error / (sum * static_cast<double>(ports_.size()));
    ++spread_samples_;
  }
}

double replica_probe::messages_sent() const {
  double total = 0;
  for (std::uint16_t port : ports_) {
    const auto page = sets_page(port);
    if (page.is_object() && page.contains("replication")) total += page["replication"].value("messages_sent", 0.0);
  }
  return total;
}

replication_report replica_probe::finish(double wall_s) {
  stop_ = true;
  if (sampler_.joinable()) sampler_.join();
  replication_report report;
  report.replicas = ports_.size();
  report.sync = sync_;
  if (cv_samples_ > 0) report.load_cv = cv_sum_ / static_cast<double>(cv_samples_);
  if (spread_samples_ > 0) report.disagreement = spread_sum_ / static_cast<double>(spread_samples_);
  if (!sync_) return report;
  std::vector<double> p50s;
  for (std::uint16_t port : ports_) {
    const auto page = sets_page(port);
    if (!page.is_object() || !page.contains("replication")) continue;
    const auto& lag = page["replication"]["sync_lag_ms"];
    if (lag.value("samples", 0) == 0) continue;
    p50s.push_back(lag.value("p50", 0.0));
    report.lag_p99_ms = std::max(report.lag_p99_ms, lag.value("p99", 0.0));
  }
  if (!p50s.empty()) {
    std::nth_element(p50s.begin(), p50s.begin() + static_cast<std::ptrdiff_t>(p50s.size() / 2), p50s.end());
    report.lag_p50_ms = p50s[p50s.size() / 2];
  }
  if (wall_s > 0) report.nats_messages_per_s = (messages_sent() - sent_before_) / wall_s;
  return report;
}

}  // namespace kvr::bench
