/// `kvrouter --model NAME --worker SPEC ... --port P`: one worker set from the command line.
/// Builds the set's pipeline as the gate says (docs/configuration.md): the scorer always; the
/// hasher pool only where prefix overlap is scored; the KV subscriber only where KV events are
/// used; then serves the OpenAI API until SIGINT or SIGTERM.

#include <csignal>
#include <iostream>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "actors/http_ingress.hpp"
#include "actors/kv_subscriber.hpp"
#include "actors/runtime.hpp"
#include "actors/scorer.hpp"
#include "app/cli.hpp"
#include "app/commands.hpp"
#include "core/worker_spec.hpp"

namespace kvr::cli {

int run_serve(const options& options) {
  const serve_options& serve = options.serve;
  auto fail = [](const std::string& message) {
    std::cerr << "kvrouter: " << message << "\n";
    return 2;
  };
  if (serve.model.empty()) return fail("--model is required to serve (the name clients put in \"model\")");
  if (serve.workers.empty()) return fail("at least one --worker is required to serve");
  std::vector<worker_spec> specs;
  for (const std::string& text : serve.workers) {
    auto spec = parse_worker_spec(text);
    if (!spec) return fail(spec.error().message);
    specs.push_back(std::move(*spec));
  }
  const router_config& config = options.router;

  // Signals go to one thread that stops the server; every other thread blocks them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  caf::actor_system_config caf_config;
  configure_actor_system(caf_config, serve.actor_threads);
  caf::actor_system system{caf_config};

  worker_set_route set;
  set.name = serve.model;
  set.model = serve.model;
  set.config = config;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    set.workers.push_back(make_worker_target(worker_name(specs[i], i), specs[i].url));
    if (set.workers.back().host.empty())
      return fail(fmt::format("worker {}: only http:// worker URLs are supported", specs[i].url));
  }

  scorer_settings scorer_config;
  scorer_config.config = config;
  for (const worker_target& w : set.workers) scorer_config.worker_names.push_back(w.name);
  scorer_config.unhealthy_backoff = std::chrono::milliseconds(serve.unhealthy_backoff_ms);
  std::vector<kv_publisher> publishers;
  if (should_subscribe_to_kv_events(config)) {
    for (const publisher_spec& p : expand_publishers(specs)) {
      if (p.endpoint.empty() && serve.kv_bind.empty()) continue;  // this worker publishes no events
      publishers.push_back({.worker = static_cast<worker_id>(publishers.size()), .name = p.name, .endpoint = p.endpoint,
                            .replay_endpoint = p.replay_endpoint, .topic = p.topic});
      scorer_config.publisher_worker.push_back(p.worker);
      scorer_config.publisher_names.push_back(p.name);
    }
    if (publishers.empty())
      std::cerr << "kvrouter: warning: kv mode with KV events, but no worker has a kv= endpoint; "
                   "overlap stays 0 (add kv=, or use --no-kv-events for approximate mode)\n";
  }
  set.snapshot = scorer_config.snapshot;
  set.scorer = spawn_scorer(system, scorer_config);
  if (uses_prefix_overlap(config))
    for (std::size_t i = 0; i < std::max<std::size_t>(serve.hashers, 1); ++i)
      set.hashers.push_back(spawn_hasher(system, set.scorer, config.block_size, true));

  std::optional<kv_subscriber> subscriber;
  try {
    if (!publishers.empty()) {
      kv_subscriber_settings kv_settings;
      kv_settings.publishers = publishers;
      kv_settings.bind_endpoint = serve.kv_bind;
      subscriber.emplace(kv_settings, [scorer = set.scorer](kv_updates updates) { caf::anon_send(scorer, std::move(updates)); });
    }
  } catch (const std::exception& e) {
    return fail(e.what());
  }

  ingress_settings http;
  http.host = serve.host;
  http.port = serve.port;
  http.threads = serve.io_threads;
  http.max_body_bytes = serve.max_body_bytes;
  http.max_retries = serve.max_retries;
  http.client_timeout = std::chrono::seconds(serve.client_timeout_secs);
  http.upstream_timeout = std::chrono::seconds(serve.upstream_timeout_secs);
  std::optional<http_ingress> ingress;
  try {
    ingress.emplace(http);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  auto table = std::make_shared<routing_table>();
  table->sets.push_back(set);
  ingress->set_routing_table(table);

  std::cerr << fmt::format("kvrouter: serving model {} with {} worker(s) on http://{}:{} (router_mode {}{}{})\n",
                           serve.model, set.workers.size(), serve.host, ingress->port(), to_string(config.mode),
                           uses_prefix_overlap(config) ? ", prefix overlap on" : "",
                           subscriber ? fmt::format(", {} KV-event publisher(s)", publishers.size()) : std::string{});

  std::thread signal_waiter([&] {
    int received = 0;
    sigwait(&signals, &received);
    ingress->stop();
  });
  ingress->run();
  if (signal_waiter.joinable()) {
    pthread_kill(signal_waiter.native_handle(), SIGTERM);  // harmless if it already returned
    signal_waiter.join();
  }
  if (subscriber) subscriber->stop();
  caf::anon_send_exit(set.scorer, caf::exit_reason::user_shutdown);
  for (const auto& h : set.hashers) caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
  std::cerr << "kvrouter: stopped\n";
  return 0;
}

}  // namespace kvr::cli
