#include "actors/pipeline/watcher.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "actors/pipeline/set_registry.hpp"
#include "core/common/json_parse.hpp"

namespace kvr {
namespace {

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
    auto parsed = parse_json<nlohmann::json>(text);
    nlohmann::json card = parsed ? std::move(*parsed) : nlohmann::json(nlohmann::json::value_t::discarded);
    auto alone = parse_router_document(nlohmann::json{{"router", to_json(global)}, {"worker_sets", nlohmann::json::array({card})}});
    if (!parsed || !alone) {
      std::cerr << "kvrouter: etcd key " << key << " rejected ("
                << (!parsed ? "its card " + describe(parsed.error()) : alone.error().message) << ")"
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

/// "restarted a; started c; stopped b; retuned d; kept e": what a reload did, naming only the
/// kinds of change it made (a set both stopped and started is restarted).
std::string describe(const reload_plan& plan) {
  std::vector<std::string> restarted, started, stopped;
  for (const std::string& name : plan.start)
    (std::ranges::find(plan.stop, name) != plan.stop.end() ? restarted : started).push_back(name);
  for (const std::string& name : plan.stop)
    if (std::ranges::find(plan.start, name) == plan.start.end()) stopped.push_back(name);
  std::vector<std::string> parts;
  auto add = [&parts](std::string_view verb, const std::vector<std::string>& list) {
    if (!list.empty()) parts.push_back(fmt::format("{} {}", verb, fmt::join(list, ", ")));
  };
  add("restarted", restarted);
  add("started", started);
  add("stopped", stopped);
  add("retuned in place", plan.retune);
  add("kept", plan.keep);
  return fmt::format("{}", fmt::join(parts, "; "));
}

struct watcher_state {
  watcher_settings settings;
  std::unique_ptr<set_registry> registry;
  file_stamp_t stamp;
  std::map<std::string, nlohmann::json> last_good_cards;
  watcher_actor::pointer self = nullptr;

  /// Sends `table` to the ingress actor; `installed(true)` runs once ingress serves by it,
  /// `installed(false)` if it could not.
  void publish(std::shared_ptr<const routing_table> table, std::function<void(bool)> installed = {}) {
    self->request(settings.ingress, caf::infinite, std::move(table))
        .then(
            [installed](bool ok) {
              if (installed) installed(ok);
            },
            [installed](const caf::error& e) {
              std::cerr << "kvrouter: routing table not installed: " << caf::to_string(e) << "\n";
              if (installed) installed(false);
            });
  }

  /// Applies `next` and publishes the table (`installed` runs once ingress serves by it); the
  /// error text, or "" on success.
  std::string apply(const router_file& next, std::string_view source, std::function<void(bool)> installed = {}) {
    reload_plan changes;
    auto table = registry->apply(next, changes);
    if (!table) return table.error();
    publish(*table, std::move(installed));
    if (!source.empty() && (!changes.start.empty() || !changes.stop.empty() || !changes.retune.empty()))
      std::cerr << fmt::format("kvrouter: {}: {}\n", source, describe(changes));
    return {};
  }

  void poll_file() {
    if (settings.config_path.empty()) return;
    const file_stamp_t now = file_stamp(settings.config_path);
    if (!now.readable || now == stamp) return;
    stamp = now;
    auto next = load_router_file(settings.config_path);
    const std::string error = next ? apply(*next, "config reloaded") : next.error();
    ++(error.empty() ? settings.reloads->file_applied : settings.reloads->file_rejected);
    if (!error.empty()) std::cerr << "kvrouter: config change rejected, keeping the last good config: " << error << "\n";
  }
};

watcher_actor::behavior_type watcher(watcher_actor::stateful_pointer<watcher_state> self, caf::actor_system* system,
                                     watcher_settings settings) {
  auto& s = self->state;
  s.settings = std::move(settings);
  s.self = self;
  s.registry = std::make_unique<set_registry>(*system, s.settings.pipeline, [self](const caf::actor& a) { self->monitor(a); });
  self->set_down_handler([self](caf::down_msg& down) {
    auto& s = self->state;
    auto order = s.registry->on_down(down.source, down.reason);
    if (!order) return;
    if (order->component.empty()) {
      self->delayed_send(self, order->delay, restart_atom_v, order->set_id, std::string());
      return;
    }
    s.publish(s.registry->table());  // the set is degraded until the restart
    self->delayed_send(self, order->delay, restart_atom_v, order->set_id, order->component);
  });
  if (!s.settings.config_path.empty()) s.stamp = file_stamp(s.settings.config_path);
  self->delayed_send(self, std::chrono::milliseconds(200), tick_atom_v);
  return {
      [self](apply_atom, const std::shared_ptr<const router_file>& file) -> caf::result<std::string> {
        auto answer = self->make_response_promise<std::string>();
        const std::string error = self->state.apply(*file, "", [answer](bool ok) mutable {
          answer.deliver(ok ? std::string() : std::string("the routing table could not be installed"));
        });
        if (!error.empty()) answer.deliver(error);  // the promise owns the request's answer now
        return answer;
      },
      [self](const std::shared_ptr<const etcd_cards>& cards) {
        auto& s = self->state;
        try {
          const std::string error = s.apply(file_from_etcd(s.settings.etcd_global, *cards, s.last_good_cards), "etcd");
          if (!error.empty()) throw std::runtime_error(error);
          ++s.settings.reloads->etcd_applied;
        } catch (const std::exception& e) {
          ++s.settings.reloads->etcd_rejected;
          std::cerr << "kvrouter: etcd change rejected, keeping the last good config: " << e.what() << "\n";
        }
      },
      [self](tick_atom) {
        self->state.registry->reap();
        self->state.poll_file();
        self->delayed_send(self, std::chrono::milliseconds(200), tick_atom_v);
      },
      [self](restart_atom, std::uint64_t set_id, const std::string& component) {
        if (auto table = self->state.registry->restart(set_id, component)) self->state.publish(std::move(table));
      },
      [self](fault_atom, const std::string& set, const std::string& component) {
        return self->state.registry->kill(set, component);
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

void config_reload_counters::write_metrics(std::string& out) const {
  out += "# HELP kvrouter_config_reloads_total Config changes (a file edit, an etcd change) applied or rejected.\n"
         "# TYPE kvrouter_config_reloads_total counter\n";
  for (const auto& [source, result, count] :
       {std::tuple{"file", "applied", &file_applied}, std::tuple{"file", "rejected", &file_rejected},
        std::tuple{"etcd", "applied", &etcd_applied}, std::tuple{"etcd", "rejected", &etcd_rejected}})
    out += fmt::format("kvrouter_config_reloads_total{{source=\"{}\",result=\"{}\"}} {}\n", source, result, count->load());
}

watcher_actor spawn_watcher(caf::actor_system& system, watcher_settings settings) {
  return system.spawn(watcher, &system, std::move(settings));
}

}  // namespace kvr
