#pragma once
/// Scrapes each worker's engine metrics (`GET /metrics`, vLLM's and SGLang's names) every
/// interval and hands the scorer what they say (waiting and running requests, cache usage,
/// block size), driven by a detached actor like the health checker. A scrape that fails or says
/// nothing usable is counted, never fatal; a worker whose scrapes stop is judged on its
/// bookings alone once its last one is older than the scorer's freshness limit.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/pipeline/component.hpp"
#include "actors/sources/http_poller.hpp"
#include "messages/scorer_actor.hpp"

namespace kvr {

/// A set's scrape counters (read by /metrics while the scraper writes them).
struct engine_scrape_counters {
  std::atomic<std::uint64_t> ok{0};               ///< scrapes that told the scorer something
  std::atomic<std::uint64_t> failed{0};           ///< no answer, or not HTTP 200
  std::atomic<std::uint64_t> unusable{0};         ///< answered, but none of the engine's load gauges in it
  std::atomic<std::uint64_t> malformed_lines{0};  ///< lines of answers that were not Prometheus text
};

struct engine_scrape_target {
  std::uint32_t worker = 0;
  poll_target where;
  std::string label;  ///< how the log names it, e.g. "worker set m: worker w0 (http://10.0.0.5:8000)"
};

struct engine_scraper_settings {
  poll_settings poll;              ///< interval, timeout, body limit
  std::uint32_t block_size = 16;   ///< the card's: an engine reporting another one is warned about once
};

class engine_scraper final : public pollable_component {
 public:
  engine_scraper(engine_scraper_settings settings, scorer_actor scorer, std::vector<engine_scrape_target> targets,
                 std::shared_ptr<engine_scrape_counters> counters);
  ~engine_scraper() override;
  void poll_for(std::chrono::milliseconds budget) override;
  engine_scraper(const engine_scraper&) = delete;
  engine_scraper& operator=(const engine_scraper&) = delete;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kvr
