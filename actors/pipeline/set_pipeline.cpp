#include "actors/pipeline/set_pipeline.hpp"

#include <algorithm>
#include <iostream>
#include <random>
#include <thread>

#include <caf/all.hpp>
#include <fmt/format.h>

#include "actors/pipeline/hasher.hpp"
#include "actors/pipeline/media_fetcher.hpp"
#include "actors/pipeline/runtime.hpp"
#include "actors/pipeline/scorer.hpp"
#include "actors/replica/replica_hub.hpp"
#include "actors/sources/engine_scraper.hpp"
#include "actors/sources/health_checker.hpp"
#include "actors/sources/kv_subscriber.hpp"
#include "core/prompt/chat_budget.hpp"
#include "core/prompt/model_files.hpp"

namespace kvr {
namespace {

/// What the health checker or engine scraper polls of `worker`: `path` under its base path.
poll_target poll_target_of(const worker_target& worker, const std::string& path) {
  return {.host = worker.host, .port = worker.port, .path = worker.base_path + path, .tls = worker.tls};
}

/// The set's tokenizer and chat template: loaded once, shared read-only by its hashers.
/// `tokenizer` and `tokenizer_config` may be files or HuggingFace model directories.
std::expected<hasher_resources, std::string> load_hasher_resources(const worker_set_card& card) {
  hasher_resources resources;
  const auto files = resolve_model_files(card.tokenizer, card.tokenizer_config);
  if (!files) return std::unexpected(fmt::format("worker set {}: {}", card.name, files.error()));
  if (!files->tokenizer.empty()) {
    std::ifstream in(files->tokenizer);
    if (!in) return std::unexpected(fmt::format("worker set {}: cannot read tokenizer {}", card.name, files->tokenizer));
    std::stringstream text;
    text << in.rdbuf();
    auto loaded = tokenizer::from_json(text.str());
    if (!loaded)
      return std::unexpected(fmt::format("worker set {}: tokenizer {}: {}", card.name, files->tokenizer, loaded.error().message));
    resources.text_tokenizer = std::make_shared<const tokenizer>(std::move(*loaded));
  }
  if (!files->chat_template.empty()) {
    auto chat = chat_template::load(files->chat_template);
    if (chat) {
      resources.chat = std::make_shared<const chat_template>(std::move(*chat));
    } else if (card.chat_template_fallback_concat) {
      std::cerr << "kvrouter: warning: worker set " << card.name << ": " << chat.error()
                << "; chat requests are rendered as plain 'role: content' lines (chat_template_fallback: concat)\n";
    } else {
      return std::unexpected(fmt::format("worker set {}: {} (set chat_template_fallback to \"concat\" to route on "
                                         "plain 'role: content' lines instead)",
                                         card.name, chat.error()));
    }
  }
  resources.chat_plain_fallback = !resources.chat && card.chat_template_fallback_concat;
  if (resources.text_tokenizer && (resources.chat || resources.chat_plain_fallback)) {
    tokenizer probe = resources.text_tokenizer->share();
    resources.chat_tokens_per_message = probe_tokens_per_message(resources.chat.get(), probe);
  }
  resources.multimodal = card.multimodal;
  return resources;
}

}  // namespace

std::expected<void, std::string> check_model_files(const worker_set_card& card) {
  auto resources = load_hasher_resources(card);
  if (!resources) return std::unexpected(resources.error());
  return {};
}

std::expected<void, std::string> start_set(caf::actor_system& system, const router_file& file,
                                           const worker_set_card& card, const pipeline_settings& serve, running_set& out) {
  const router_config config = effective_config(file, card);
  worker_set_route& set = out.route;
  set.name = card.name;
  set.model = card.model;
  set.config = config;
  for (const worker_spec& w : card.workers) {
    auto target = make_worker_target(w.id, w.url);
    if (!target) return std::unexpected(fmt::format("worker set {}: worker {}: {}", card.name, w.url, target.error()));
    target->bootstrap_port = w.bootstrap_port;
    set.workers.push_back(std::move(*target));
  }
  set.disaggregation = card.disaggregation;
  scorer_settings scorer_config;
  worker_set_router_settings& routing = scorer_config.routing;
  routing.config = config;
  for (const worker_target& w : set.workers) routing.worker_names.push_back(w.name);
  for (const worker_spec& w : card.workers) routing.worker_roles.push_back(w.role);
  routing.disaggregation = card.disaggregation;
  routing.unhealthy_backoff = serve.unhealthy_backoff;
  // Ties are broken at random, differently per process: replicas with one seed would make the
  // same picks in the same order and herd onto the same workers.
  routing.seed = (std::uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  if (serve.replicas) {
    routing.share_bookings = true;
    routing.peer_timeout = 3 * serve.replicas->settings().snapshot_interval;  // three snapshot rounds missed
    scorer_config.replicas = serve.replicas;
    scorer_config.set_name = card.name;
    out.replicas = serve.replicas;
  }
  routing.index_grace = serve.index_grace;
  // About three scrapes: one lost scrape changes nothing, a worker whose scrapes stopped is
  // judged on its bookings alone soon after.
  routing.engine_metrics_ttl = std::max(3 * (serve.engine_metrics.interval + serve.engine_metrics.timeout),
                                        std::chrono::milliseconds(1000));
  std::vector<kv_publisher> publishers;
  if (should_subscribe_to_kv_events(config)) {
    for (const publisher_spec& p : expand_publishers(card.workers)) {
      if (p.endpoint.empty() && serve.kv_bind.empty()) continue;  // this worker publishes no events
      publishers.push_back(to_kv_publisher(p, static_cast<worker_id>(publishers.size())));
      routing.publisher_worker.push_back(p.worker);
      routing.publisher_names.push_back(p.name);
    }
  }
  set.snapshot = scorer_config.snapshot;
  std::shared_ptr<media_fetcher> resources_fetcher;
  const scorer_handle scorer = spawn_scorer(system, scorer_config);
  set.scorer = scorer.actor;
  set.scoring = scorer.core;
  if (uses_prefix_overlap(config)) {
    auto resources = load_hasher_resources(card);
    if (!resources) return std::unexpected(resources.error());
    set.prompts = resources->capabilities();
    set.text_tokenizer = resources->text_tokenizer;
    set.chat = resources->chat;
    set.chat_plain_fallback = resources->chat_plain_fallback;
    resources->counters = set.hashing;
    resources->max_prompt_tokens = serve.max_prompt_tokens;
    // The gate: image URLs are fetched only where images can pay off (prefix overlap scored,
    // and the card describes the model's images). Everywhere else no fetcher exists at all.
    if (resources->multimodal) {
      try {
        resources->fetcher = std::make_shared<media_fetcher>(
            serve.media, std::shared_ptr<media_fetch_counters>(set.hashing, &set.hashing->media));
      } catch (const std::exception& e) {  // e.g. an unreadable --media-ca-file
        return std::unexpected(fmt::format("worker set {}: media fetcher: {}", card.name, e.what()));
      }
    }
    set.fetches_media = resources->fetcher != nullptr;
    resources_fetcher = resources->fetcher;
    const std::size_t hashers = serve.hashers != 0 ? serve.hashers : usable_cores();
    for (std::size_t i = 0; i < hashers; ++i)
      set.hashers.push_back(spawn_hasher(system, scorer, config.block_size, *resources));
  }
  auto add = [&](std::string name, std::function<std::shared_ptr<pollable_component>()> make) {
    component_slot slot{.name = std::move(name), .make = std::move(make),
                        .backoff = restart_backoff(serve.restart_backoff, std::chrono::seconds(10), std::chrono::seconds(60))};
    slot.instance = slot.make();
    out.components.push_back(std::move(slot));
  };
  try {
    if (resources_fetcher) add("media_fetcher", [fetcher = resources_fetcher] { return fetcher; });
    if (serve.health.interval.count() > 0) {
      std::vector<health_target> targets;
      for (std::uint32_t w = 0; w < set.workers.size(); ++w)
        targets.push_back({w, poll_target_of(set.workers[w], "/health"),
                           fmt::format("worker set {}: worker {} ({})", set.name, set.workers[w].name, set.workers[w].url)});
      add("health_checker", [settings = serve.health, scorer = set.scorer, targets, ca_file = serve.worker_ca_file] {
        return std::make_shared<health_checker>(settings, scorer, targets, ca_file);
      });
      out.health_checks = true;
    }
    if (serve.engine_metrics.interval.count() > 0) {
      std::vector<engine_scrape_target> targets;
      for (std::uint32_t w = 0; w < set.workers.size(); ++w)
        targets.push_back({w, poll_target_of(set.workers[w], "/metrics"),
                           fmt::format("worker set {}: worker {} ({})", set.name, set.workers[w].name, set.workers[w].url)});
      const engine_scraper_settings settings{
          .poll = {.interval = serve.engine_metrics.interval, .timeout = serve.engine_metrics.timeout, .body_limit = 8 << 20,
                   .ca_file = serve.worker_ca_file},
          .block_size = config.block_size};
      add("engine_scraper", [settings, scorer = set.scorer, targets, counters = set.scrapes] {
        return std::make_shared<engine_scraper>(settings, scorer, targets, counters);
      });
    }
    // Each decoder thread keeps its publishers' order; the scorer applies what every thread
    // delivers.
    const auto shares =
        share_out_publishers(publishers, kv_decoder_threads(serve.kv_decoders, publishers.size(), !serve.kv_bind.empty()));
    const std::size_t shards = shares.size();
    out.subscribers.resize(shards);
    for (std::size_t shard = 0; shard < shards; ++shard) {
      kv_subscriber_settings kv_settings;
      kv_settings.publishers = shares[shard];
      kv_settings.bind_endpoint = serve.kv_bind;
      kv_settings.warm_replays_done = set.kv_warm.emplace_back(std::make_shared<std::atomic<bool>>(false));
      add(shards == 1 ? "kv_subscriber" : fmt::format("kv_subscriber/{}", shard),
          [kv_settings, scorer = set.scorer, &out, shard] {
            auto subscriber = std::make_shared<kv_subscriber>(
                kv_settings, [scorer](kv_updates updates) { caf::anon_send(scorer, std::move(updates)); });
            out.subscribers[shard] = subscriber;
            return subscriber;
          });
    }
  } catch (const std::exception& e) {
    return std::unexpected(fmt::format("worker set {}: {}", card.name, e.what()));
  }
  return {};
}

void drive(caf::actor_system& system, component_slot& slot) {
  const std::string thread_name = slot.name.starts_with("kv_subscriber") ? "kvr-kv-sub"
                                  : slot.name == "health_checker" ? "kvr-health"
                                  : slot.name == "engine_scraper" ? "kvr-scrape"
                                                                  : "kvr-media";
  slot.driver = spawn_component_driver(system, slot.instance, thread_name);
  slot.started = std::chrono::steady_clock::now();
}

void stop_set(running_set& set, bool keep_actors) {
  for (component_slot& slot : set.components) {
    if (slot.driver) caf::anon_send_exit(slot.driver, caf::exit_reason::user_shutdown);
    slot.driver = nullptr;
    slot.instance.reset();  // the driver holds it until it is down
  }
  set.subscribers.clear();
  // A retired set's scorer may still answer its last jobs; it no longer speaks for the set.
  if (set.replicas && set.route.scorer) set.replicas->detach(set.route.name, set.route.scorer->address());
  if (keep_actors) return;
  if (set.route.scorer) caf::anon_send_exit(set.route.scorer, caf::exit_reason::user_shutdown);
  for (const auto& h : set.route.hashers) caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
}

}  // namespace kvr
