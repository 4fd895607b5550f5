#include "actors/sources/engine_scraper.hpp"

#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "core/metrics/engine_metrics.hpp"

namespace kvr {

struct engine_scraper::impl {
  engine_scraper_settings settings;
  scorer_actor scorer;
  std::vector<engine_scrape_target> targets;
  std::vector<std::uint8_t> warned_block_size;
  std::vector<std::optional<double>> start_times;  ///< per target, as last scraped
  std::shared_ptr<engine_scrape_counters> counters;
  std::optional<http_poller> poller;

  void on_scrape(std::size_t i, const poll_result& result) {
    if (!result.answered || result.status != 200) {
      ++counters->failed;
      return;
    }
    auto scrape = std::make_shared<engine_scrape>();
    scrape->worker = targets[i].worker;
    scrape->metrics = read_engine_metrics(result.body);
    counters->malformed_lines += scrape->metrics.parse.malformed;
    if (!scrape->metrics.usable()) {
      ++counters->unusable;
      return;
    }
    ++counters->ok;
    warn_about_block_size(i, scrape->metrics);
    if (engine_restarted(start_times[i], scrape->metrics.start_time))
      std::cerr << fmt::format("kvrouter: {} restarted (its process_start_time_seconds moved on): its prefix-index "
                               "entries are dropped until its KV events tell what it caches again\n",
                               targets[i].label);
    if (scrape->metrics.start_time) start_times[i] = scrape->metrics.start_time;
    caf::anon_send(scorer, engine_scrape_ptr(std::move(scrape)));
  }

  /// Block hashes only match when the router cuts blocks as the engine does.
  void warn_about_block_size(std::size_t i, const engine_metrics& metrics) {
    if (!metrics.block_size || *metrics.block_size == settings.block_size || warned_block_size[i]) return;
    warned_block_size[i] = 1;
    std::cerr << fmt::format(
        "kvrouter: warning: {} reports block_size {} in vllm:cache_config_info, but the card says {}; "
        "no prefix of its cache will match (set the card's block_size to the engine's)\n",
        targets[i].label, *metrics.block_size, settings.block_size);
  }
};

engine_scraper::engine_scraper(engine_scraper_settings settings, scorer_actor scorer,
                               std::vector<engine_scrape_target> targets, std::shared_ptr<engine_scrape_counters> counters)
    : impl_(std::make_unique<impl>()) {
  impl_->settings = settings;
  impl_->scorer = std::move(scorer);
  impl_->targets = std::move(targets);
  impl_->warned_block_size.assign(impl_->targets.size(), 0);
  impl_->start_times.resize(impl_->targets.size());
  impl_->counters = std::move(counters);
  std::vector<poll_target> polls;
  for (const engine_scrape_target& t : impl_->targets) polls.push_back(t.where);
  impl_->poller.emplace(settings.poll, std::move(polls),
                        [impl = impl_.get()](std::size_t i, const poll_result& r) { impl->on_scrape(i, r); });
}

engine_scraper::~engine_scraper() = default;

void engine_scraper::poll_for(std::chrono::milliseconds budget) { impl_->poller->run_for(budget); }

}  // namespace kvr
