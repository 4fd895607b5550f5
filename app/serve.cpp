/// Serving: `kvrouter --model NAME --worker SPEC ...` (one worker set from the command line),
/// `kvrouter --config FILE` or `kvrouter --etcd URL`. Wires the HTTP ingress to the watcher
/// actor, which builds every set's pipeline from its effective config (actors/pipeline/watcher.hpp).

#include <atomic>
#include <csignal>
#include <iostream>
#include <optional>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "actors/http/http_ingress.hpp"
#include "actors/http/ingress_actor.hpp"
#include "actors/pipeline/runtime.hpp"
#include "actors/pipeline/set_pipeline.hpp"
#include "actors/pipeline/watcher.hpp"
#include "actors/replica/replica_hub.hpp"
#include "app/cli.hpp"
#include "app/commands.hpp"
#include "core/config/router_file.hpp"

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
    if (options.router_flags_given || !serve.model.empty() || !serve.workers.empty() || serve.disaggregation != "none")
      return std::unexpected("with --config, models, workers, router options and --disaggregation come from the file");
    return load_router_file(serve.config_path);
  }
  if (serve.model.empty()) return std::unexpected("--model is required to serve (the name clients put in \"model\")");
  if (serve.workers.empty()) return std::unexpected("at least one --worker is required to serve");
  router_file file;
  file.router = options.router;
  worker_set_card card{.name = serve.model, .model = serve.model, .block_size = options.router.block_size,
                       .tokenizer = serve.tokenizer_path, .tokenizer_config = serve.tokenizer_config_path,
                       .chat_template_fallback_concat = serve.chat_template_fallback == "concat"};
  if (!card.tokenizer_config.empty() && card.tokenizer.empty())
    return std::unexpected("--tokenizer-config needs --tokenizer (the rendered chat is tokenized to route)");
  if (serve.image_token_id) {
    card.multimodal = multimodal_card{.image_token_id = *serve.image_token_id, .rule = serve.image_token_rule,
                                      .fixed_tokens = serve.image_fixed_tokens};
  }
  for (std::size_t i = 0; i < serve.workers.size(); ++i) {
    auto spec = parse_worker_flag(serve.workers[i], "kvrouter");
    if (!spec) return std::unexpected(spec.error().message);
    if (spec->id.empty()) spec->id = worker_name(*spec, i);
    card.workers.push_back(std::move(*spec));
  }
  if (const auto protocol = parse_pd_protocol(serve.disaggregation)) card.disaggregation = disaggregation_card{.protocol = *protocol};
  if (auto roles = validate_roles(card.workers, card.disaggregation, "the command-line set"); !roles)
    return std::unexpected(roles.error().message);
  file.sets.push_back(std::move(card));
  return file;
}

/// Replica sync as the flags and the config file's keys give it (a flag wins); no servers
/// means a lone router.
std::expected<replica_settings, std::string> replica_settings_of(const serve_options& serve, const replica_file_options& file) {
  const replica_options& flags = serve.replicas;
  replica_settings settings;
  const std::string servers = flags.nats_given ? flags.nats : file.nats.value_or("");
  for (std::size_t start = 0; start < servers.size();) {
    const std::size_t comma = std::min(servers.find(',', start), servers.size());
    if (comma > start) settings.servers.push_back(servers.substr(start, comma - start));
    start = comma + 1;
  }
  for (const std::string& url : settings.servers)
    if (!url.starts_with("nats://"))
      return std::unexpected(fmt::format("--nats: \"{}\" is not a nats://host:port URL", url));
  settings.replica_id = flags.replica_id_given ? flags.replica_id : file.replica_id.value_or("");
  if (settings.replica_id.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    settings.replica_id = fmt::format("{}-{}", host, getpid());
  }
  settings.subject_prefix = flags.subject_prefix_given ? flags.subject_prefix : file.nats_subject_prefix.value_or(flags.subject_prefix);
  if (auto bad = invalid_subject_prefix(settings.subject_prefix)) return std::unexpected("--nats-subject-prefix: " + *bad);
  settings.warmup = flags.warmup_given || !file.replica_warmup_ms ? flags.warmup : std::chrono::milliseconds(*file.replica_warmup_ms);
  return settings;
}

}  // namespace

int run_explain(const options& options) {
  if (options.serve.config_path.empty()) return fail("explain needs --config FILE");
  auto file = load_sets(options);
  if (!file) return fail(file.error());
  // What serving would load: the tokenizers and chat templates of sets that hash prompts.
  for (const worker_set_card& card : file->sets)
    if (uses_prefix_overlap(effective_config(*file, card)))
      if (auto checked = check_model_files(card); !checked) return fail(checked.error());
  std::cout << explain(*file).dump(2) << "\n";
  return 0;
}

int run_serve(const options& options) {
  const serve_options& serve = options.serve;
  auto file = load_sets(options);
  if (!file) return fail(file.error());

  // A reader of the access log on stdout that goes away (`kvrouter --access-log - | head`) must
  // not kill the router: its writes then fail with EPIPE and are counted as dropped.
  std::signal(SIGPIPE, SIG_IGN);
  // Signals go to one thread that stops the server; every other thread blocks them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const std::size_t cores = usable_cores();
  const std::size_t actor_threads = serve.actor_threads == 0 ? cores : serve.actor_threads;
  caf::actor_system_config caf_config;
  configure_actor_system(caf_config, actor_threads);
  caf::actor_system system{caf_config};

  std::optional<http_ingress> ingress;
  try {
    ingress.emplace(serve.http);
  } catch (const std::exception& e) {
    return fail(e.what());
  }

  // Replica sync: one NATS link for every set (routing never waits on it).
  std::shared_ptr<replica_hub> replicas;
  auto replica_config = replica_settings_of(serve, file->replicas);
  if (!replica_config) return fail(replica_config.error());
  if (!replica_config->servers.empty()) {
    try {
      replicas = std::make_shared<replica_hub>(std::move(*replica_config));
    } catch (const std::exception& e) {
      return fail(e.what());
    }
    // A new replica is ready once it knows what the others know: NATS reached, one snapshot
    // round heard, and its sets' KV-event warm-start replays done; or once the warm-up is over.
    ingress->set_readiness_gate([replicas](const routing_table& table) -> std::optional<std::string> {
      if (replicas->warm_up_over()) return std::nullopt;
      if (auto why = replicas->warming_up()) return why;
      for (const worker_set_route& set : table.sets)
        if (!set.kv_replays_done()) return fmt::format("replaying the KV events of worker set {}", set.name);
      return std::nullopt;
    });
    ingress->set_replication_status([replicas] { return replicas->status().dump(); });
  }

  watcher_settings watch;
  watch.pipeline = serve.pipeline;
  watch.pipeline.replicas = replicas;
  watch.pipeline.max_prompt_tokens = serve.http.max_prompt_tokens;
  watch.pipeline.worker_ca_file = serve.http.worker_ca_file;
  watch.config_path = serve.config_path;
  watch.etcd_global = options.router;
  const ingress_actor ingress_owner = spawn_ingress_actor(system, *ingress);
  watch.ingress = ingress_owner;
  const watcher_actor watcher = spawn_watcher(system, watch);
  ingress->set_metrics_writer([reloads = watch.reloads, replicas](std::string& out) {
    reloads->write_metrics(out);
    if (replicas) replicas->write_metrics(out);
  });
  ingress->set_fault_injector([watcher](std::string set, std::string component) {
    caf::anon_send(watcher, fault_atom_v, std::move(set), std::move(component));
  });
  std::string error;
  {
    // Scoped: a scoped actor counts as running (even hidden, in CAF 0.17), and shutdown waits
    // for every running actor.
    caf::scoped_actor self{system};
    self->request(watcher, caf::infinite, apply_atom_v, std::make_shared<const router_file>(*file))
        .receive([&](const std::string& result) { error = result; },
                 [&](const caf::error& e) { error = caf::to_string(e); });
  }
  if (!error.empty()) {
    caf::anon_send_exit(watcher, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(ingress_owner, caf::exit_reason::user_shutdown);
    return fail(error);
  }

  const std::string models = file->sets.size() == 1 ? file->sets.front().model : fmt::format("{} models", file->sets.size());
  std::cerr << fmt::format("kvrouter: serving {} on http://{}:{}\n", models, serve.http.host, ingress->port());
  std::cerr << fmt::format("kvrouter: {} I/O threads, {} actor threads, {} hashers per set that scores prefix overlap\n",
                           serve.http.threads == 0 ? cores : serve.http.threads, actor_threads,
                           serve.pipeline.hashers == 0 ? cores : serve.pipeline.hashers);
  if (replicas)
    std::cerr << fmt::format("kvrouter: replica {} shares its bookings on {}.SET.* over NATS ({})\n",
                             replicas->settings().replica_id, replicas->settings().subject_prefix,
                             fmt::join(replicas->settings().servers, ", "));

  // With --etcd, the prefix's every state goes to the watcher.
  std::unique_ptr<etcd_source> etcd;
  if (!serve.etcd_url.empty()) {
    try {
      etcd = std::make_unique<etcd_source>(etcd_settings{serve.etcd_url, serve.etcd_prefix, std::chrono::milliseconds(1000)},
                                           [watcher](const etcd_cards& cards) {
                                             caf::anon_send(watcher, std::make_shared<const etcd_cards>(cards));
                                           });
    } catch (const std::exception& e) {
      caf::anon_send_exit(watcher, caf::exit_reason::user_shutdown);
      caf::anon_send_exit(ingress_owner, caf::exit_reason::user_shutdown);
      return fail(e.what());
    }
  }

  // The first SIGTERM or SIGINT drains (in-flight requests finish); a second one stops at once.
  std::atomic<bool> served{false};
  std::thread signal_waiter([&] {
    for (int signals_seen = 0;; ++signals_seen) {
      int received = 0;
      sigwait(&signals, &received);
      if (served.load()) return;  // run() returned: the wake-up below
      if (signals_seen == 0) {
        ingress->drain(serve.http.drain_delay, serve.http.shutdown_grace);
      } else {
        std::cerr << "kvrouter: second signal: stopping now\n";
        caf::anon_send(ingress_owner, stop_atom_v);
        return;
      }
    }
  });
  ingress->run();
  served = true;
  if (signal_waiter.joinable()) {
    pthread_kill(signal_waiter.native_handle(), SIGTERM);  // harmless if it already returned
    signal_waiter.join();
  }
  etcd.reset();
  caf::anon_send_exit(watcher, caf::exit_reason::user_shutdown);  // its state retires every set
  caf::anon_send_exit(ingress_owner, caf::exit_reason::user_shutdown);
  // Routing jobs hold their connections; the actors answer or drop them before the ingress,
  // whose I/O threads those connections belong to, goes away.
  system.await_all_actors_done();
  std::cerr << "kvrouter: stopped\n";
  return 0;
}

}  // namespace kvr::cli
