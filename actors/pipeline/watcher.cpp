#include "actors/pipeline/watcher.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "actors/pipeline/hasher.hpp"
#include "actors/sources/kv_subscriber.hpp"
#include "actors/pipeline/scorer.hpp"

namespace kvr {
namespace {

/// One running worker set: its route (actors and workers) and its KV subscriber, if any.
struct running_set {
  worker_set_route route;
  std::optional<kv_subscriber> subscriber;
  std::unique_ptr<health_checker> health;
};

/// The set's tokenizer and chat template: loaded once, shared read-only by its hashers.
std::expected<hasher_resources, std::string> load_hasher_resources(const worker_set_card& card) {
  hasher_resources resources;
  if (!card.tokenizer.empty()) {
    std::ifstream in(card.tokenizer);
    if (!in) return std::unexpected(fmt::format("worker set {}: cannot read tokenizer {}", card.name, card.tokenizer));
    std::stringstream text;
    text << in.rdbuf();
    auto loaded = tokenizer::from_json(text.str());
    if (!loaded)
      return std::unexpected(fmt::format("worker set {}: tokenizer {}: {}", card.name, card.tokenizer, loaded.error().message));
    resources.text_tokenizer = std::make_shared<const tokenizer>(std::move(*loaded));
  }
  if (!card.tokenizer_config.empty()) {
    auto chat = chat_template::load(card.tokenizer_config);
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
  resources.multimodal = card.multimodal;
  return resources;
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
    set.workers.push_back(std::move(*target));
  }
  scorer_settings scorer_config;
  worker_set_router_settings& routing = scorer_config.routing;
  routing.config = config;
  for (const worker_target& w : set.workers) routing.worker_names.push_back(w.name);
  routing.unhealthy_backoff = serve.unhealthy_backoff;
  routing.index_grace = serve.index_grace;
  std::vector<kv_publisher> publishers;
  if (should_subscribe_to_kv_events(config)) {
    for (const publisher_spec& p : expand_publishers(card.workers)) {
      if (p.endpoint.empty() && serve.kv_bind.empty()) continue;  // this worker publishes no events
      publishers.push_back(to_kv_publisher(p, static_cast<worker_id>(publishers.size())));
      routing.publisher_worker.push_back(p.worker);
      routing.publisher_names.push_back(p.name);
    }
    if (publishers.empty())
      std::cerr << "kvrouter: warning: worker set " << card.name
                << " scores KV events, but no worker has a kv= endpoint; overlap stays 0 "
                   "(add kv=, or use --no-kv-events for approximate mode)\n";
  }
  set.snapshot = scorer_config.snapshot;
  set.scorer = spawn_scorer(system, scorer_config);
  if (uses_prefix_overlap(config)) {
    auto resources = load_hasher_resources(card);
    if (!resources) return std::unexpected(resources.error());
    set.prompts = resources->capabilities();
    resources->counters = set.hashing;
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
    for (std::size_t i = 0; i < std::max<std::size_t>(serve.hashers, 1); ++i)
      set.hashers.push_back(spawn_hasher(system, set.scorer, config.block_size, *resources));
  }
  if (serve.health.interval.count() > 0) {
    std::vector<health_target> targets;
    for (std::uint32_t w = 0; w < set.workers.size(); ++w)
      targets.push_back({w, set.workers[w].host, set.workers[w].port, set.workers[w].base_path + "/health"});
    out.health = std::make_unique<health_checker>(serve.health, set.scorer, std::move(targets));
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
  set_registry(caf::actor_system& system, const pipeline_settings& serve) : system_(system), serve_(serve) {}
  ~set_registry() {
    for (auto& [name, set] : running_) retire(set);
    for (auto& r : graveyard_) kill(*r.set);
  }

  /// Applies `next`; on failure nothing changes. Returns the table to install.
  std::expected<std::shared_ptr<routing_table>, std::string> apply(const router_file& next, reload_plan& plan) {
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
    nlohmann::json sets = explain(next);
    for (std::size_t i = 0; i < next.sets.size(); ++i) {
      const running_set& set = *running_.at(next.sets[i].name);
      table->sets.push_back(set.route);
      // What actually runs, beside what the config says should.
      sets["sets"][i]["pipeline"] = {{"hashers", set.route.hashers.size()},
                                     {"hashes_text", set.route.prompts.tokenizer},
                                     {"hashes_chat", set.route.prompts.chat},
                                     {"media_fetcher", set.route.fetches_media},
                                     {"kv_subscriber", set.subscriber.has_value()},
                                     {"kv_publishers", set.subscriber ? set.subscriber->stats().size() : 0},
                                     {"health_checks", set.health != nullptr}};
    }
    table->sets_json = sets.dump();
    return table;
  }

  /// Ends retired sets whose grace period is over.
  void reap() {
    const auto now = std::chrono::steady_clock::now();
    std::erase_if(graveyard_, [&](retired& r) {
      if (now - r.at < std::chrono::seconds(10)) return false;
      kill(*r.set);
      return true;
    });
  }

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
  const pipeline_settings& serve_;
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

struct watcher_state {
  watcher_settings settings;
  std::unique_ptr<set_registry> registry;
  file_stamp_t stamp;
  std::map<std::string, nlohmann::json> last_good_cards;

  /// Applies `next` and publishes the table; the error text, or "" on success.
  std::string apply(const router_file& next, std::string_view source) {
    reload_plan changes;
    auto table = registry->apply(next, changes);
    if (!table) return table.error();
    settings.publish(*table);
    if (!source.empty() && (!changes.start.empty() || !changes.stop.empty()))
      std::cerr << fmt::format("kvrouter: {}: kept {}; started {}; stopped {}\n", source, names(changes.keep),
                               names(changes.start), names(changes.stop));
    return {};
  }

  void poll_file() {
    if (settings.config_path.empty()) return;
    const file_stamp_t now = file_stamp(settings.config_path);
    if (!now.readable || now == stamp) return;
    stamp = now;
    auto next = load_router_file(settings.config_path);
    const std::string error = next ? apply(*next, "config reloaded") : next.error();
    if (!error.empty()) std::cerr << "kvrouter: config change rejected, keeping the last good config: " << error << "\n";
  }
};

watcher_actor::behavior_type watcher(watcher_actor::stateful_pointer<watcher_state> self, caf::actor_system* system,
                                     watcher_settings settings) {
  auto& s = self->state;
  s.settings = std::move(settings);
  s.registry = std::make_unique<set_registry>(*system, s.settings.pipeline);
  if (!s.settings.config_path.empty()) s.stamp = file_stamp(s.settings.config_path);
  self->delayed_send(self, std::chrono::milliseconds(200), tick_atom_v);
  return {
      [self](apply_atom, const std::shared_ptr<const router_file>& file) { return self->state.apply(*file, ""); },
      [self](const std::shared_ptr<const etcd_cards>& cards) {
        auto& s = self->state;
        try {
          const std::string error = s.apply(file_from_etcd(s.settings.etcd_global, *cards, s.last_good_cards), "etcd");
          if (!error.empty()) throw std::runtime_error(error);
        } catch (const std::exception& e) {
          std::cerr << "kvrouter: etcd change rejected, keeping the last good config: " << e.what() << "\n";
        }
      },
      [self](tick_atom) {
        self->state.registry->reap();
        self->state.poll_file();
        self->delayed_send(self, std::chrono::milliseconds(200), tick_atom_v);
      },
  };
}

}  // namespace

std::expected<router_file, std::string> load_router_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::unexpected(fmt::format("cannot read {}", path));
  std::stringstream text;
  text << in.rdbuf();
  auto file = parse_router_file(text.str());
  if (!file) return std::unexpected(fmt::format("{}: {}", path, file.error().message));
  return *file;
}

watcher_actor spawn_watcher(caf::actor_system& system, watcher_settings settings) {
  return system.spawn(watcher, &system, std::move(settings));
}

}  // namespace kvr
