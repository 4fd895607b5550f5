/// Serving: `kvrouter --model NAME --worker SPEC ...` (one worker set from the command line) or
/// `kvrouter --config FILE` (the sets of a config file). Each set's pipeline follows its
/// effective config (docs/configuration.md, the gate): the scorer always; the hasher pool only
/// where prefix overlap is scored; the KV subscriber only where KV events are used too.

#include <atomic>
#include <csignal>
#include <filesystem>
#include <map>
#include <mutex>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "actors/etcd_source.hpp"
#include "actors/health_checker.hpp"
#include "actors/http_ingress.hpp"
#include "actors/kv_subscriber.hpp"
#include "actors/runtime.hpp"
#include "actors/scorer.hpp"
#include "app/cli.hpp"
#include "app/commands.hpp"
#include "core/router_file.hpp"

namespace kvr::cli {
namespace {

int fail(const std::string& message) {
  std::cerr << "kvrouter: " << message << "\n";
  return 2;
}

/// The worker sets to serve: from --config, or one set from --model / --worker.
std::expected<router_file, std::string> load_sets(const options& options) {
  const serve_options& serve = options.serve;
  if (!serve.etcd_url.empty()) {  // the cards arrive from etcd; start with none
    if (!serve.config_path.empty() || !serve.model.empty() || !serve.workers.empty())
      return std::unexpected("with --etcd, models and workers come from etcd (no --config, --model or --worker)");
    router_file file;
    file.router = options.router;
    return file;
  }
  if (!serve.config_path.empty()) {
    if (options.router_flags_given || !serve.model.empty() || !serve.workers.empty())
      return std::unexpected("with --config, models, workers and router options come from the file");
    std::ifstream in(serve.config_path);
    if (!in) return std::unexpected(fmt::format("cannot read {}", serve.config_path));
    std::stringstream text;
    text << in.rdbuf();
    auto file = parse_router_file(text.str());
    if (!file) return std::unexpected(fmt::format("{}: {}", serve.config_path, file.error().message));
    return *file;
  }
  if (serve.model.empty()) return std::unexpected("--model is required to serve (the name clients put in \"model\")");
  if (serve.workers.empty()) return std::unexpected("at least one --worker is required to serve");
  router_file file;
  file.router = options.router;
  worker_set_card card{.name = serve.model, .model = serve.model, .block_size = options.router.block_size};
  for (std::size_t i = 0; i < serve.workers.size(); ++i) {
    auto spec = parse_worker_spec(serve.workers[i]);
    if (!spec) return std::unexpected(spec.error().message);
    if (spec->id.empty()) spec->id = worker_name(*spec, i);
    card.workers.push_back(std::move(*spec));
  }
  file.sets.push_back(std::move(card));
  return file;
}

/// One running worker set: its route (actors and workers) and its KV subscriber, if any.
struct running_set {
  worker_set_route route;
  std::optional<kv_subscriber> subscriber;
  std::unique_ptr<health_checker> health;
};

std::expected<void, std::string> start_set(caf::actor_system& system, const router_file& file,
                                           const worker_set_card& card, const serve_options& serve, running_set& out) {
  const router_config config = effective_config(file, card);
  worker_set_route& set = out.route;
  set.name = card.name;
  set.model = card.model;
  set.config = config;
  for (const worker_spec& w : card.workers) {
    set.workers.push_back(make_worker_target(w.id, w.url));
    if (set.workers.back().host.empty())
      return std::unexpected(fmt::format("worker set {}: worker {}: only http:// worker URLs are supported", card.name, w.url));
  }
  scorer_settings scorer_config;
  scorer_config.config = config;
  for (const worker_target& w : set.workers) scorer_config.worker_names.push_back(w.name);
  scorer_config.unhealthy_backoff = std::chrono::milliseconds(serve.unhealthy_backoff_ms);
  scorer_config.index_grace = std::chrono::seconds(serve.index_grace_secs);
  std::vector<kv_publisher> publishers;
  if (should_subscribe_to_kv_events(config)) {
    for (const publisher_spec& p : expand_publishers(card.workers)) {
      if (p.endpoint.empty() && serve.kv_bind.empty()) continue;  // this worker publishes no events
      publishers.push_back({.worker = static_cast<worker_id>(publishers.size()), .name = p.name, .endpoint = p.endpoint,
                            .replay_endpoint = p.replay_endpoint, .topic = p.topic});
      scorer_config.publisher_worker.push_back(p.worker);
      scorer_config.publisher_names.push_back(p.name);
    }
    if (publishers.empty())
      std::cerr << "kvrouter: warning: worker set " << card.name
                << " scores KV events, but no worker has a kv= endpoint; overlap stays 0 "
                   "(add kv=, or use --no-kv-events for approximate mode)\n";
  }
  set.snapshot = scorer_config.snapshot;
  set.scorer = spawn_scorer(system, scorer_config);
  if (uses_prefix_overlap(config))
    for (std::size_t i = 0; i < std::max<std::size_t>(serve.hashers, 1); ++i)
      set.hashers.push_back(spawn_hasher(system, set.scorer, config.block_size, true));
  if (serve.health_interval_ms > 0) {
    std::vector<health_target> targets;
    for (std::uint32_t w = 0; w < set.workers.size(); ++w)
      targets.push_back({w, set.workers[w].host, set.workers[w].port, set.workers[w].base_path + "/health"});
    out.health = std::make_unique<health_checker>(
        health_settings{std::chrono::milliseconds(serve.health_interval_ms), std::chrono::milliseconds(serve.health_timeout_ms),
                        std::max<std::uint32_t>(serve.health_failures, 1), std::max<std::uint32_t>(serve.health_successes, 1)},
        set.scorer, std::move(targets));
  }
  if (!publishers.empty()) {
    kv_subscriber_settings kv_settings;
    kv_settings.publishers = publishers;
    kv_settings.bind_endpoint = serve.kv_bind;
    try {
      out.subscriber.emplace(kv_settings, [scorer = set.scorer](kv_updates updates) { caf::anon_send(scorer, std::move(updates)); });
    } catch (const std::exception& e) {
      return std::unexpected(fmt::format("worker set {}: {}", card.name, e.what()));
    }
  }
  return {};
}

/// The running worker sets, kept in step with the config: starts what a new config adds or
/// changes, stops what it removes or changes, keeps the rest untouched. Retired sets stop
/// their KV subscriber at once; their actors live 10 s more, so that routing decisions already
/// asked of them are answered (in-flight proxying does not need them).
class set_registry {
 public:
  set_registry(caf::actor_system& system, const serve_options& serve) : system_(system), serve_(serve) {}
  ~set_registry() {
    for (auto& [name, set] : running_) retire(set);
    for (auto& r : graveyard_) kill(*r.set);
  }

  /// Applies `next`; on failure nothing changes. Returns the table to install.
  std::expected<std::shared_ptr<routing_table>, std::string> apply(const router_file& next, reload_plan& plan) {
    std::lock_guard lock(mutex_);
    if (running_.empty()) {
      plan = {};
      for (const worker_set_card& card : next.sets) plan.start.push_back(card.name);
    } else {
      plan = plan_reload(current_, next);
    }
    std::map<std::string, std::shared_ptr<running_set>> started;
    for (const std::string& name : plan.start) {
      const auto card = std::find_if(next.sets.begin(), next.sets.end(), [&](const auto& c) { return c.name == name; });
      auto set = std::make_shared<running_set>();
      if (auto ok = start_set(system_, next, *card, serve_, *set); !ok) {
        for (auto& [_, s] : started) kill(*s);
        kill(*set);
        return std::unexpected(ok.error());
      }
      started[name] = std::move(set);
    }
    for (const std::string& name : plan.stop) {
      retire(running_.at(name));
      running_.erase(name);
    }
    for (auto& [name, set] : started) running_[name] = std::move(set);
    current_ = next;
    auto table = std::make_shared<routing_table>();
    table->sets_json = explain(next).dump();
    for (const worker_set_card& card : next.sets) table->sets.push_back(running_.at(card.name)->route);
    return table;
  }

  /// Ends retired sets whose grace period is over.
  void reap() {
    std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    std::erase_if(graveyard_, [&](retired& r) {
      if (now - r.at < std::chrono::seconds(10)) return false;
      kill(*r.set);
      return true;
    });
  }

  /// The running sets (call before any other thread applies changes).
  [[nodiscard]] const std::map<std::string, std::shared_ptr<running_set>>& running() const { return running_; }

 private:
  struct retired {
    std::shared_ptr<running_set> set;
    std::chrono::steady_clock::time_point at;
  };

  void retire(const std::shared_ptr<running_set>& set) {
    if (set->subscriber) set->subscriber->stop();
    set->health.reset();
    graveyard_.push_back({set, std::chrono::steady_clock::now()});
  }
  static void kill(running_set& set) {
    if (set.subscriber) set.subscriber->stop();
    set.health.reset();
    if (set.route.scorer) caf::anon_send_exit(set.route.scorer, caf::exit_reason::user_shutdown);
    for (const auto& h : set.route.hashers) caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
  }

  caf::actor_system& system_;
  const serve_options& serve_;
  std::mutex mutex_;  ///< the config watcher and the etcd thread both apply and reap
  router_file current_;
  std::map<std::string, std::shared_ptr<running_set>> running_;
  std::vector<retired> graveyard_;
};

/// The config file's identity for change detection: modification time and size; `readable`
/// is false while it cannot be read (e.g. between an editor's delete and rename).
struct file_stamp_t {
  bool readable = false;
  std::filesystem::file_time_type time{};
  std::uintmax_t size = 0;
  friend bool operator==(const file_stamp_t&, const file_stamp_t&) = default;
};

file_stamp_t file_stamp(const std::string& path) {
  std::error_code ec;
  const auto time = std::filesystem::last_write_time(path, ec);
  if (ec) return {};
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return {};
  return {true, time, size};
}

/// The router file etcd describes: the global config from the command line and one card per
/// key. A key whose card is invalid keeps its last good card (or none), with the reason logged.
router_file file_from_etcd(const router_config& global, const etcd_cards& cards, std::map<std::string, nlohmann::json>& last_good) {
  nlohmann::json sets = nlohmann::json::array();
  for (auto it = last_good.begin(); it != last_good.end();) it = cards.contains(it->first) ? std::next(it) : last_good.erase(it);
  for (const auto& [key, text] : cards) {
    nlohmann::json card = nlohmann::json::parse(text, nullptr, false);
    auto alone = parse_router_document(nlohmann::json{{"router", to_json(global)}, {"worker_sets", nlohmann::json::array({card})}});
    if (card.is_discarded() || !alone) {
      std::cerr << "kvrouter: etcd key " << key << " rejected ("
                << (card.is_discarded() ? std::string("not valid JSON") : alone.error().message) << ")"
                << (last_good.contains(key) ? ", keeping its last good card\n" : "\n");
      if (last_good.contains(key)) sets.push_back(last_good[key]);
      continue;
    }
    last_good[key] = card;
    sets.push_back(std::move(card));
  }
  auto file = parse_router_document(nlohmann::json{{"router", to_json(global)}, {"worker_sets", std::move(sets)}});
  if (file) return *file;
  throw std::runtime_error(file.error().message);  // e.g. two keys serving one model
}

std::string names(const std::vector<std::string>& list) {
  return list.empty() ? "-" : fmt::format("{}", fmt::join(list, ", "));
}

}  // namespace

int run_explain(const options& options) {
  if (options.serve.config_path.empty()) return fail("explain needs --config FILE");
  auto file = load_sets(options);
  if (!file) return fail(file.error());
  std::cout << explain(*file).dump(2) << "\n";
  return 0;
}

int run_serve(const options& options) {
  const serve_options& serve = options.serve;
  auto file = load_sets(options);
  if (!file) return fail(file.error());

  // Signals go to one thread that stops the server; every other thread blocks them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  caf::actor_system_config caf_config;
  configure_actor_system(caf_config, serve.actor_threads);
  caf::actor_system system{caf_config};

  set_registry registry(system, serve);
  reload_plan plan;
  auto table = registry.apply(*file, plan);
  if (!table) return fail(table.error());

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
  ingress->set_routing_table(*table);

  for (const auto& [name, s] : registry.running())
    std::cerr << fmt::format("kvrouter: worker set {}: model {}, {} worker(s), router_mode {}{}{}\n", name,
                             s->route.model, s->route.workers.size(), to_string(s->route.config.mode),
                             uses_prefix_overlap(s->route.config) ? ", prefix overlap on" : "",
                             s->subscriber ? ", KV events subscribed" : "");
  const auto& sets = registry.running();
  const std::string models = sets.size() == 1 ? sets.begin()->second->route.model : fmt::format("{} models", sets.size());
  std::cerr << fmt::format("kvrouter: serving {} on http://{}:{}\n", models, serve.host, ingress->port());

  // With --config, edits to the file are picked up (polled once a second): a valid one is
  // applied set by set, an invalid one is logged and the last good config stays in force.
  std::atomic<bool> stopping{false};
  std::thread config_watcher([&] {
    file_stamp_t stamp = serve.config_path.empty() ? file_stamp_t{} : file_stamp(serve.config_path);
    while (!stopping) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      registry.reap();
      if (serve.config_path.empty()) continue;
      const auto now = file_stamp(serve.config_path);
      if (!now.readable || now == stamp) continue;
      stamp = now;
      auto next = load_sets(options);
      if (!next) {
        std::cerr << "kvrouter: config change rejected, keeping the last good config: " << next.error() << "\n";
        continue;
      }
      reload_plan changes;
      auto next_table = registry.apply(*next, changes);
      if (!next_table) {
        std::cerr << "kvrouter: config change rejected, keeping the last good config: " << next_table.error() << "\n";
        continue;
      }
      ingress->set_routing_table(*next_table);
      std::cerr << fmt::format("kvrouter: config reloaded: kept {}; started {}; stopped {}\n", names(changes.keep),
                               names(changes.start), names(changes.stop));
    }
  });

  // With --etcd, every change under the prefix is applied the same way.
  std::map<std::string, nlohmann::json> last_good_cards;
  std::unique_ptr<etcd_source> etcd;
  if (!serve.etcd_url.empty()) {
    try {
      etcd = std::make_unique<etcd_source>(
          etcd_settings{serve.etcd_url, serve.etcd_prefix, std::chrono::milliseconds(1000)}, [&](const etcd_cards& cards) {
            try {
              reload_plan changes;
              auto next_table = registry.apply(file_from_etcd(options.router, cards, last_good_cards), changes);
              if (!next_table) throw std::runtime_error(next_table.error());
              ingress->set_routing_table(*next_table);
              if (!changes.start.empty() || !changes.stop.empty())
                std::cerr << fmt::format("kvrouter: etcd: kept {}; started {}; stopped {}\n", names(changes.keep),
                                         names(changes.start), names(changes.stop));
            } catch (const std::exception& e) {
              std::cerr << "kvrouter: etcd change rejected, keeping the last good config: " << e.what() << "\n";
            }
          });
    } catch (const std::exception& e) {
      return fail(e.what());
    }
  }

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
  stopping = true;
  config_watcher.join();
  etcd.reset();
  std::cerr << "kvrouter: stopped\n";
  return 0;
}

}  // namespace kvr::cli
