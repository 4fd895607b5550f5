#pragma once
/// Active health checks of a worker set's workers: `GET /health` every interval, driven by a
/// detached actor (actors/pipeline/component); after `failures` consecutive failed probes a worker is reported down to the set's
/// scorer, after `successes` consecutive good ones up again. Passive marking (a proxy failure)
/// is the scorer's own back-off; both must clear for a worker to be routable.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/pipeline/component.hpp"
#include "actors/pipeline/pipeline_settings.hpp"
#include "actors/sources/http_poller.hpp"
#include "messages/scorer_actor.hpp"

namespace kvr {

struct health_target {
  std::uint32_t worker = 0;  ///< worker id in its set
  poll_target where;         ///< its /health
  std::string label;  ///< how the log names it, e.g. "worker set m: worker w0 (http://10.0.0.5:8000)"
};

class health_checker final : public pollable_component {
 public:
  /// `ca_file`: trust for https:// workers besides the system's (--worker-ca-file).
  health_checker(health_settings settings, scorer_actor scorer, std::vector<health_target> targets,
                 const std::string& ca_file = "");
  ~health_checker() override;
  /// Runs the probes' I/O for `budget`.
  void poll_for(std::chrono::milliseconds budget) override;
  health_checker(const health_checker&) = delete;
  health_checker& operator=(const health_checker&) = delete;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kvr
