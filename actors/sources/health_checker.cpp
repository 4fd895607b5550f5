#include "actors/sources/health_checker.hpp"

#include <iostream>

#include <fmt/format.h>

#include "actors/sources/http_poller.hpp"

namespace kvr {
namespace {

/// One worker's verdicts: consecutive results counted, transitions reported.
struct worker_verdicts {
  bool down = false;  ///< as last reported (workers start up)
  std::uint32_t failures = 0;
  std::uint32_t successes = 0;
};

}  // namespace

struct health_checker::impl {
  health_settings settings;
  scorer_actor scorer;
  std::vector<health_target> targets;
  std::vector<worker_verdicts> verdicts;
  std::optional<http_poller> poller;

  void on_probe(std::size_t i, const poll_result& result) {
    const bool healthy = result.answered && result.status == 200;
    const std::string why = result.answered ? fmt::format("HTTP {}", result.status) : result.error;
    worker_verdicts& v = verdicts[i];
    if (healthy) {
      v.failures = 0;
      if (v.down && ++v.successes >= settings.successes) report(i, true, why);
    } else {
      v.successes = 0;
      if (!v.down && ++v.failures >= settings.failures) report(i, false, why);
    }
  }

  /// One log line per transition, with what the last probe saw.
  void report(std::size_t i, bool up, const std::string& why) {
    const health_target& target = targets[i];
    worker_verdicts& v = verdicts[i];
    std::cerr << (up ? fmt::format("kvrouter: {} is up again: GET {} answered 200 ({} good probe(s) in a row)\n",
                                   target.label, target.where.path, v.successes)
                     : fmt::format("kvrouter: {} is down: GET {}: {} ({} failed probe(s) in a row)\n", target.label,
                                   target.where.path, why, v.failures));
    v.down = !up;
    v.failures = v.successes = 0;
    caf::anon_send(scorer, worker_health_atom_v, target.worker, up);
  }
};

health_checker::health_checker(health_settings settings, scorer_actor scorer, std::vector<health_target> targets,
                               const std::string& ca_file)
    : impl_(std::make_unique<impl>()) {
  impl_->settings = settings;
  impl_->scorer = std::move(scorer);
  impl_->targets = std::move(targets);
  impl_->verdicts.resize(impl_->targets.size());
  std::vector<poll_target> polls;
  for (const health_target& t : impl_->targets) polls.push_back(t.where);
  impl_->poller.emplace(poll_settings{.interval = settings.interval, .timeout = settings.timeout, .body_limit = 64 * 1024,
                                      .ca_file = ca_file},
                        std::move(polls), [impl = impl_.get()](std::size_t i, const poll_result& r) { impl->on_probe(i, r); });
}

health_checker::~health_checker() = default;

void health_checker::poll_for(std::chrono::milliseconds budget) { impl_->poller->run_for(budget); }

}  // namespace kvr
