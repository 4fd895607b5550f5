#include "actors/pipeline/set_registry.hpp"

#include <algorithm>
#include <iostream>

#include <malloc.h>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actors/sources/kv_subscriber.hpp"
#include "core/routing/set_summary.hpp"

namespace kvr {
namespace {

using steady = std::chrono::steady_clock;

std::chrono::milliseconds to_ms(duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d); }

}  // namespace

set_registry::set_registry(caf::actor_system& system, const pipeline_settings& serve, monitor_fn monitor)
    : system_(system), serve_(serve), monitor_(std::move(monitor)) {}

set_registry::~set_registry() {
  for (auto& [name, set] : running_) stop_set(*set, false);
  for (auto& r : graveyard_) stop_set(*r.set, false);
}

std::expected<std::shared_ptr<running_set>, std::string> set_registry::start(const router_file& file,
                                                                             const worker_set_card& card) {
  auto set = std::make_shared<running_set>();
  set->id = next_id_++;
  set->started = steady::now();
  if (auto ok = start_set(system_, file, card, serve_, *set); !ok) {
    stop_set(*set, false);
    return std::unexpected(ok.error());
  }
  return set;
}

/// Publishers the set's KV decoder threads subscribe to.
static std::size_t kv_publisher_count(const running_set& set) {
  std::size_t publishers = 0;
  for (const auto& subscriber : set.subscribers)
    if (subscriber) publishers += subscriber->stats().size();
  return publishers;
}

/// One line per started set saying what it does with each kind of prompt, and a warning for
/// each path that routes on less than its config asks for.
static void say_what_it_does(const running_set& set) {
  const set_summary summary = summarize_set({.name = set.route.name,
                                             .config = set.route.config,
                                             .prompts = set.route.prompts,
                                             .workers = set.route.workers.size(),
                                             .kv_publishers = kv_publisher_count(set)});
  for (const std::string& warning : summary.warnings) std::cerr << "kvrouter: warning: " << warning << "\n";
  std::cerr << "kvrouter: " << summary.line << "\n";
}

/// Drives and monitors a started set's actors (once it is certain to run).
static void supervise(caf::actor_system& system, running_set& set, const set_registry::monitor_fn& monitor) {
  monitor(caf::actor_cast<caf::actor>(set.route.scorer));
  for (const auto& h : set.route.hashers) monitor(caf::actor_cast<caf::actor>(h));
  for (component_slot& slot : set.components) {
    drive(system, slot);
    monitor(slot.driver);
  }
}

std::expected<std::shared_ptr<routing_table>, std::string> set_registry::apply(const router_file& next, reload_plan& plan) {
  if (running_.empty()) {
    plan = {};
    for (const worker_set_card& card : next.sets) plan.start.push_back(card.name);
  } else {
    plan = plan_reload(current_, next);
  }
  std::map<std::string, std::shared_ptr<running_set>> started;
  for (const std::string& name : plan.start) {
    const worker_set_card* card = card_named(next, name);
    auto set = start(next, *card);
    if (!set) {
      for (auto& [_, s] : started) stop_set(*s, false);
      return std::unexpected(set.error());
    }
    started[name] = std::move(*set);
  }
  for (const std::string& name : plan.retune) {
    const worker_set_card* card = card_named(next, name);
    running_set& set = *running_.at(name);
    set.route.config = effective_config(next, *card);  // ingress's local picks read it from the table
    caf::anon_send(set.route.scorer, std::make_shared<const router_config>(set.route.config));
  }
  for (const std::string& name : plan.stop) {
    retire(running_.at(name));
    running_.erase(name);
  }
  for (auto& [name, set] : started) {
    supervise(system_, *set, monitor_);
    say_what_it_does(*set);
    running_[name] = std::move(set);
  }
  current_ = next;
  return table();
}

std::shared_ptr<routing_table> set_registry::table() const {
  auto table = std::make_shared<routing_table>();
  nlohmann::json sets = explain(current_);
  for (std::size_t i = 0; i < current_.sets.size(); ++i) {
    const running_set& set = *running_.at(current_.sets[i].name);
    worker_set_route route = set.route;
    nlohmann::json components = nlohmann::json::object();
    bool degraded = false;
    for (const component_slot& slot : set.components) {
      route.components.push_back({slot.name, slot.driver != nullptr, slot.restarts});
      degraded |= slot.driver == nullptr;
      components[slot.name] = {{"running", slot.driver != nullptr}, {"restarts", slot.restarts}};
      if (!slot.last_failure.empty()) components[slot.name]["last_failure"] = slot.last_failure;
    }
    if (auto it = set_restarts_.find(set.route.name); it != set_restarts_.end()) route.restarts = it->second.first;
    table->sets.push_back(std::move(route));
    // What actually runs, beside what the config says should.
    sets["sets"][i]["pipeline"] = {{"hashers", set.route.hashers.size()},
                                   {"hashes_text", set.route.prompts.tokenizer},
                                   {"hashes_chat", set.route.prompts.chat},
                                   {"media_fetcher", set.route.fetches_media},
                                   {"kv_subscriber", !set.subscribers.empty()},
                                   {"kv_decoders", set.subscribers.size()},
                                   {"kv_publishers", kv_publisher_count(set)},
                                   {"health_checks", set.health_checks},
                                   {"components", std::move(components)},
                                   {"set_restarts", table->sets.back().restarts},
                                   {"degraded", degraded}};
  }
  table->sets_json = sets.dump();
  return table;
}

running_set* set_registry::find(std::uint64_t id) {
  for (auto& [name, set] : running_)
    if (set->id == id) return set.get();
  return nullptr;
}

std::optional<set_registry::restart_order> set_registry::on_down(const caf::actor_addr& who, const caf::error& reason) {
  const auto now = steady::now();
  const std::string why = caf::to_string(reason);
  for (auto& [name, set] : running_) {
    for (component_slot& slot : set->components) {
      if (!slot.driver || slot.driver.address() != who) continue;
      slot.driver = nullptr;
      ++slot.restarts;
      slot.last_failure = why;
      const auto delay = to_ms(slot.backoff.on_failure(slot.started, now));
      std::cerr << fmt::format("kvrouter: worker set {}: {} stopped ({}); restarting it in {} ms\n", name, slot.name, why,
                               delay.count());
      return restart_order{set->id, slot.name, delay};
    }
    const bool scorer = caf::actor_cast<caf::actor_addr>(set->route.scorer) == who;
    const bool hasher = std::any_of(set->route.hashers.begin(), set->route.hashers.end(),
                                    [&](const auto& h) { return caf::actor_cast<caf::actor_addr>(h) == who; });
    if (!scorer && !hasher) continue;
    auto& [restarts, backoff] =
        set_restarts_.try_emplace(name, 0, restart_backoff(serve_.restart_backoff, std::chrono::seconds(10), std::chrono::seconds(60)))
            .first->second;
    ++restarts;
    const auto delay = to_ms(backoff.on_failure(set->started, now));
    std::cerr << fmt::format("kvrouter: worker set {}: its {} stopped ({}); restarting the set in {} ms\n", name,
                             scorer ? "scorer" : "hasher", why, delay.count());
    return restart_order{set->id, "", delay};
  }
  return std::nullopt;
}

std::shared_ptr<routing_table> set_registry::restart(std::uint64_t set_id, const std::string& component) {
  running_set* set = find(set_id);
  if (set == nullptr) return nullptr;  // replaced or removed meanwhile
  trim_at_ = steady::now() + std::chrono::seconds(2);  // the dead instance's memory is freed by then
  if (component.empty()) {
    const std::string name = set->route.name;
    const worker_set_card* card = card_named(current_, name);
    auto fresh = start(current_, *card);
    if (!fresh) {
      std::cerr << fmt::format("kvrouter: worker set {}: restart failed: {}\n", name, fresh.error());
      return nullptr;
    }
    retire(running_.at(name));
    supervise(system_, **fresh, monitor_);
    running_[name] = std::move(*fresh);
    std::cerr << fmt::format("kvrouter: worker set {}: restarted\n", name);
    return table();
  }
  for (component_slot& slot : set->components) {
    if (slot.name != component || slot.driver) continue;
    try {
      slot.instance = slot.make();
    } catch (const std::exception& e) {  // e.g. a socket that cannot be bound yet: try again later
      slot.last_failure = e.what();
      std::cerr << fmt::format("kvrouter: worker set {}: {} cannot restart yet: {}\n", set->route.name, slot.name, e.what());
      return table();
    }
    drive(system_, slot);
    monitor_(slot.driver);
    std::cerr << fmt::format("kvrouter: worker set {}: {} restarted\n", set->route.name, slot.name);
    return table();
  }
  return nullptr;
}

bool set_registry::kill(const std::string& set_name, const std::string& component) {
  auto it = running_.find(set_name);
  if (it == running_.end()) return false;
  running_set& set = *it->second;
  if (component == "scorer") {
    caf::anon_send_exit(set.route.scorer, caf::exit_reason::kill);
    return true;
  }
  if (component == "hasher") {
    if (set.route.hashers.empty()) return false;
    caf::anon_send_exit(set.route.hashers.front(), caf::exit_reason::kill);
    return true;
  }
  // "kv_subscriber" names every KV decoder thread of the set ("kv_subscriber/0", ...).
  bool killed = false;
  for (component_slot& slot : set.components)
    if ((slot.name == component || slot.name.starts_with(component + "/")) && slot.driver) {
      caf::anon_send_exit(slot.driver, caf::exit_reason::kill);
      killed = true;
    }
  return killed;
}

void set_registry::retire(const std::shared_ptr<running_set>& set) {
  stop_set(*set, true);
  graveyard_.push_back({set, steady::now()});
}

void set_registry::reap() {
  const auto now = steady::now();
  std::erase_if(graveyard_, [&](retired& r) {
    if (now - r.at < std::chrono::seconds(10)) return false;
    stop_set(*r.set, false);
    trim_at_ = now + std::chrono::seconds(2);  // its actors have ended and freed their state by then
    return true;
  });
  if (trim_at_ && now >= *trim_at_) {
    trim_at_.reset();
    malloc_trim(0);
  }
}

}  // namespace kvr
