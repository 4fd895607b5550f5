/// `kvrouter kv-index`: the router's KV-event path on its own. Subscribes to workers' KV
/// events exactly as the router does (sequence tracking, replay, the set's scorer actor), then
/// prints the prefix index it built. Operators compare it with what their engines hold; the
/// integration tests compare it with a publisher's ground truth.

#include <chrono>
#include <iostream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actors/sources/kv_subscriber.hpp"
#include "actors/pipeline/runtime.hpp"
#include "actors/pipeline/scorer.hpp"
#include "app/cli.hpp"
#include "app/commands.hpp"
#include "app/options.hpp"
#include "core/config/worker_spec.hpp"

namespace kvr::cli {
namespace {

constexpr const char* kv_index_usage =
    "Usage: kvrouter kv-index --worker URL,kv_events=tcp://HOST:PORT[,replay=tcp://HOST:PORT][,dp_size=N][,id=NAME][,topic=T] ...\n"
    "                         [--kv-bind tcp://*:PORT] [--kv-decoders N] [--block-size N] [--max-index-blocks N]\n"
    "                         [--idle SECONDS] [--duration SECONDS] [--replay-timeout-ms N]\n"
    "\n"
    "Subscribes to the workers' KV events (connecting to each kv_events= endpoint, or with --kv-bind, binding one\n"
    "socket that engines connect to, told apart by topic), builds the prefix index as the router does,\n"
    "and prints it as JSON once no batch arrived for --idle seconds or after --duration seconds:\n"
    "per publisher its blocks' sequence hashes and event counters, plus the\n"
    "subscriber's sequence counters (gaps, replays, restarts, decode errors).\n";

nlohmann::json to_json(const kv_publisher_stats& s) {
  return {{"publisher", s.name},
          {"live_batches", s.live_batches},
          {"replay_batches", s.replay_batches},
          {"decode_errors", s.decode_errors},
          {"replays_cut_short", s.replays_cut_short},
          {"applied", s.sequence.applied},
          {"duplicates", s.sequence.duplicates},
          {"gaps", s.sequence.gaps},
          {"restarts", s.sequence.restarts},
          {"replay_requests", s.sequence.replay_requests},
          {"replayed", s.sequence.replayed},
          {"history_missing", s.sequence.history_missing},
          {"replay_unavailable", s.sequence.replay_unavailable},
          {"hold_overflows", s.sequence.hold_overflows},
          {"replays_without_progress", s.sequence.replays_without_progress},
          {"replays_given_up", s.sequence.replays_given_up}};
}

/// One publisher per worker and data-parallel rank; index ids in command-line order.
std::vector<kv_publisher> expand(const std::vector<worker_spec>& workers) {
  std::vector<kv_publisher> publishers;
  for (const publisher_spec& p : expand_publishers(workers))
    publishers.push_back(to_kv_publisher(p, static_cast<worker_id>(publishers.size())));
  return publishers;
}

/// What `kv-index` was asked for.
struct kv_index_options {
  std::vector<std::string> workers;
  kv_subscriber_settings subscriber;
  router_config config;
  double idle_secs = 2;
  double duration_secs = 60;
  std::size_t decoders = 1;
};

const option_table<kv_index_options>& kv_index_table() {
  using o_t = kv_index_options;
  static const option_table<o_t> t = {
      each<o_t>("--worker", "SPEC", "a worker: URL,kv_events=ENDPOINT[,replay=ENDPOINT][,dp_size=N][,id=NAME][,topic=T]",
                [](auto& o) -> auto& { return o.workers; }),
      text<o_t>("--kv-bind", "ENDPOINT", "bind one socket that engines connect to (told apart by topic) instead of connecting",
                [](auto& o) -> auto& { return o.subscriber.bind_endpoint; }, true),
      integer<o_t>("--kv-decoders", "N", "threads decoding the events, the publishers shared out between them as the router does",
                   [](auto& o) -> auto& { return o.decoders; }, 1, 256),
      option<o_t>{"--block-size", "N", "tokens per KV block, as the engines are configured", ">= 1",
                  [](o_t& o, std::string_view v) -> std::expected<void, std::string> {
                    if (auto set = set_knob(o.config, "block_size", v); !set) return std::unexpected(set.error().message);
                    return {};
                  },
                  [](const o_t& o) { return std::to_string(o.config.block_size); }},
      option<o_t>{"--max-index-blocks", "N", "hard bound on (publisher, block) index entries", ">= 1",
                  [](o_t& o, std::string_view v) -> std::expected<void, std::string> {
                    if (auto set = set_knob(o.config, "max_index_blocks", v); !set) return std::unexpected(set.error().message);
                    return {};
                  },
                  [](const o_t& o) { return std::to_string(o.config.max_index_blocks); }},
      real<o_t>("--idle", "SECONDS", "print once no batch arrived for this long", [](auto& o) -> auto& { return o.idle_secs; }, 0, 86400),
      real<o_t>("--duration", "SECONDS", "print after this long at the latest", [](auto& o) -> auto& { return o.duration_secs; },
                0.001, 86400 * 7),
      duration<o_t>("--replay-timeout-ms", "how long a replay request may go unanswered",
                    [](auto& o) -> auto& { return o.subscriber.replay_timeout; }, 1, 600000),
  };
  return t;
}

}  // namespace

int run_kv_index(const std::vector<std::string>& args) {
  kv_index_options parsed;
  if (auto ok = parse_options<kv_index_options>(kv_index_table(), args, parsed); !ok) {
    if (ok.error().empty()) {
      std::cout << kv_index_usage << "\nOptions:\n" << options_help<kv_index_options>(kv_index_table());
      return 0;
    }
    std::cerr << "kvrouter kv-index: " << ok.error() << "\n";
    return 2;
  }
  std::vector<worker_spec> workers;
  for (const std::string& text : parsed.workers) {
    auto spec = parse_worker_flag(text, "kvrouter kv-index");
    if (!spec) {
      std::cerr << "kvrouter kv-index: " << spec.error().message << "\n";
      return 2;
    }
    workers.push_back(std::move(*spec));
  }
  kv_subscriber_settings& settings = parsed.subscriber;
  const router_config& config = parsed.config;
  const double idle = parsed.idle_secs, duration = parsed.duration_secs;
  if (auto valid = validate(config); !valid) {
    std::cerr << "kvrouter kv-index: " << valid.error().message << "\n";
    return 2;
  }
  if (workers.empty()) {
    std::cerr << "kvrouter kv-index: at least one --worker is required\n" << kv_index_usage;
    return 2;
  }
  for (const worker_spec& w : workers)
    if (w.kv_events.empty() && settings.bind_endpoint.empty()) {
      std::cerr << "kvrouter kv-index: worker " << w.url << " has no kv_events= endpoint (or use --kv-bind)\n";
      return 2;
    }
  settings.publishers = expand(workers);

  caf::actor_system_config caf_config;
  configure_actor_system(caf_config, 2);
  caf::actor_system system{caf_config};
  scorer_settings scorer_config{.routing = {.config = config}};
  for (const kv_publisher& p : settings.publishers) scorer_config.routing.worker_names.push_back(p.name);
  const scorer_actor scorer = spawn_scorer(system, scorer_config).actor;

  std::vector<std::shared_ptr<kv_subscriber>> subscribers;
  std::vector<caf::actor> drivers;
  try {
    for (auto& share : share_out_publishers(settings.publishers, kv_decoder_threads(parsed.decoders, settings.publishers.size(),
                                                                                    !settings.bind_endpoint.empty()))) {
      kv_subscriber_settings shard = settings;
      shard.publishers = std::move(share);
      subscribers.push_back(std::make_shared<kv_subscriber>(
          shard, [scorer](kv_updates updates) { caf::anon_send(scorer, std::move(updates)); }));
    }
  } catch (const std::exception& e) {
    std::cerr << "kvrouter kv-index: " << e.what() << "\n";
    return 1;
  }
  for (const auto& subscriber : subscribers) drivers.push_back(spawn_component_driver(system, subscriber, "kvr-kv-sub"));
  auto batches_seen = [&subscribers] {
    std::uint64_t total = 0;
    for (const auto& subscriber : subscribers)
      for (const auto& s : subscriber->stats()) total += s.live_batches + s.replay_batches;
    return total;
  };

  using clock = std::chrono::steady_clock;
  const auto started = clock::now();
  auto last_activity = started;
  std::uint64_t seen = 0;
  while (clock::now() - started < std::chrono::duration<double>(duration)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (const std::uint64_t total = batches_seen(); total != seen) {
      seen = total;
      last_activity = clock::now();
    } else if (idle > 0 && seen > 0 && clock::now() - last_activity >= std::chrono::duration<double>(idle)) {
      break;
    }
  }
  nlohmann::json out;
  caf::scoped_actor self{system};
  // Once a driver is down its last step has delivered its batches: they are in the scorer's
  // mailbox before the dump request is.
  for (const caf::actor& driver : drivers) {
    self->monitor(driver);
    self->send_exit(driver, caf::exit_reason::user_shutdown);
  }
  for (std::size_t down = 0; down < drivers.size(); ++down) self->receive([](const caf::down_msg&) {});
  self->request(scorer, std::chrono::seconds(10), dump_index_atom_v)
      .receive([&](const std::string& dump) { out = nlohmann::json::parse(dump); },
               [&](const caf::error& error) { out["error"] = caf::to_string(error); });
  nlohmann::json publishers = nlohmann::json::array();
  for (const auto& subscriber : subscribers)
    for (const auto& s : subscriber->stats()) publishers.push_back(to_json(s));
  out["subscriber"] = std::move(publishers);
  std::cout << out.dump(1) << std::endl;
  self->send_exit(scorer, caf::exit_reason::user_shutdown);
  return out.contains("error") ? 1 : 0;
}

}  // namespace kvr::cli
