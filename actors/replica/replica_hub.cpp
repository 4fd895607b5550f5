#include "actors/replica/replica_hub.hpp"

#include <algorithm>
#include <iostream>

#include <caf/all.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actors/replica/nats_link.hpp"
#include "actors/replica/wall_clock.hpp"
#include "core/replica/peer_wire.hpp"

namespace kvr {
namespace {

constexpr std::size_t recent_lags = 4096;

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

const peer_origin& origin_of(const peer_message& message) {
  return std::visit([](const auto& m) -> const peer_origin& { return m.origin; }, message);
}

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  const auto at = static_cast<std::size_t>(q * static_cast<double>(values.size() - 1) + 0.5);
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(at), values.end());
  return values[at];
}

}  // namespace

replica_hub::replica_hub(replica_settings settings) : settings_(std::move(settings)) {
  if (auto bad = invalid_subject_prefix(settings_.subject_prefix)) throw std::runtime_error(*bad);
  recent_lag_ms_.reserve(recent_lags);
  link_ = std::make_unique<nats_link>(
      nats_link_settings{.servers = settings_.servers, .name = "kvrouter " + settings_.replica_id},
      settings_.subject_prefix + ".*.*",
      [this](std::string_view subject, std::span<const std::uint8_t> data) { on_message(subject, data); },
      [this](bool up) { on_state(up); });
  publisher_ = std::make_unique<peer_publisher>(
      peer_publisher_settings{.replica_id = settings_.replica_id, .subject_prefix = settings_.subject_prefix,
                              .batch_delay = settings_.batch_delay, .batch_events = settings_.batch_events},
      [link = link_.get()](const std::string& subject, std::span<const std::uint8_t> bytes) { return link->publish(subject, bytes); });
}

replica_hub::~replica_hub() {
  publisher_.reset();  // its thread publishes on the link
  link_.reset();       // no callback runs after this
}

void replica_hub::attach(const std::string& name, const caf::actor_addr& scorer, std::shared_ptr<peer_inbox> inbox) {
  publisher_->attach(name, scorer);
  std::unique_lock lock(sets_mutex_);
  sets_[subject_token(name)] = {.scorer = scorer, .inbox = std::move(inbox)};
}

void replica_hub::detach(const std::string& name, const caf::actor_addr& scorer) {
  publisher_->detach(name, scorer);
  std::unique_lock lock(sets_mutex_);
  const auto it = sets_.find(subject_token(name));
  if (it != sets_.end() && it->second.scorer == scorer) sets_.erase(it);
}

void replica_hub::on_message(std::string_view subject, std::span<const std::uint8_t> data) {
  const auto parsed = parse_peer_subject(settings_.subject_prefix, subject);
  attached_set set;
  if (parsed) {
    std::shared_lock lock(sets_mutex_);
    if (const auto it = sets_.find(parsed->set_token); it != sets_.end()) set = it->second;
  }
  if (!set.inbox) {
    counters_.unknown_set.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  auto message = decode_peer_message(data);
  if (!message) {
    if (counters_.malformed.fetch_add(1, std::memory_order_relaxed) == 0)
      std::cerr << "kvrouter: replicas: dropped a malformed message on " << subject << ": " << message.error()
                << " (counted in kvrouter_replica_messages_dropped_total from now on)\n";
    return;
  }
  const peer_origin& origin = origin_of(*message);
  if (origin.replica == settings_.replica_id) {  // our own (NATS does not echo), or a replica sharing our id
    counters_.echo.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  counters_.received.fetch_add(1, std::memory_order_relaxed);
  counters_.received_bytes.fetch_add(data.size(), std::memory_order_relaxed);
  record_lag(origin.sent_unix_ns);
  switch (set.inbox->push(std::make_shared<const peer_message>(std::move(*message)), std::chrono::steady_clock::now())) {
    case inbox_push::left: break;
    case inbox_push::left_wake_scorer:
      if (auto scorer = caf::actor_cast<scorer_actor>(caf::actor_cast<caf::strong_actor_ptr>(set.scorer)))
        caf::anon_send(scorer, peer_inbox_atom_v);
      break;
    case inbox_push::full: counters_.inbox_full.fetch_add(1, std::memory_order_relaxed); break;
  }
}

void replica_hub::record_lag(std::int64_t sent_unix_ns) {
  const std::int64_t lag_ns = std::max<std::int64_t>(0, unix_now_ns() - sent_unix_ns);
  std::lock_guard lock(lag_mutex_);
  lag_.record(std::chrono::nanoseconds(lag_ns));
  const double ms = static_cast<double>(lag_ns) / 1e6;
  if (recent_lag_ms_.size() < recent_lags) recent_lag_ms_.push_back(ms);
  else recent_lag_ms_[recent_next_] = ms;
  recent_next_ = (recent_next_ + 1) % recent_lags;
}

void replica_hub::on_state(bool up) {
  if (!up) {
    counters_.disconnects.fetch_add(1, std::memory_order_relaxed);
    std::cerr << "kvrouter: replicas: lost the NATS connection; routing on this replica's own bookings until it is back\n";
    return;
  }
  std::int64_t never = 0;
  if (first_connected_ns_.compare_exchange_strong(never, steady_ns())) {
    std::cerr << "kvrouter: replicas: connected to NATS as " << settings_.replica_id << "\n";
    return;
  }
  counters_.reconnects.fetch_add(1, std::memory_order_relaxed);
  std::cerr << "kvrouter: replicas: NATS connection back; republishing every set's bookings\n";
  std::shared_lock lock(sets_mutex_);
  for (const auto& [token, set] : sets_)
    if (auto scorer = caf::actor_cast<scorer_actor>(caf::actor_cast<caf::strong_actor_ptr>(set.scorer)))
      caf::anon_send(scorer, replica_resync_atom_v);
}

bool replica_hub::connected() const { return link_->connected(); }

std::optional<std::string> replica_hub::warming_up() const {
  if (warm_up_over()) return std::nullopt;
  const std::int64_t first = first_connected_ns_.load();
  if (first == 0) return "waiting for NATS";
  // One snapshot round after connecting, every live peer has published its bookings once.
  const auto connected_for = std::chrono::nanoseconds(steady_ns() - first);
  if (connected_for < settings_.snapshot_interval + std::chrono::milliseconds(100)) return "waiting for the peers' snapshots";
  return std::nullopt;
}

void replica_hub::write_metrics(std::string& out) const {
  auto family = [&](std::string_view name, std::string_view help, std::string_view type) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  family("kvrouter_replica_nats_connected", "1 while the NATS connection is up (replicas share bookings), else 0.", "gauge");
  out += fmt::format("kvrouter_replica_nats_connected {}\n", connected() ? 1 : 0);
  family("kvrouter_replica_nats_disconnects_total", "Times the NATS connection was lost (routing was local-only meanwhile).",
         "counter");
  out += fmt::format("kvrouter_replica_nats_disconnects_total {}\n", counters_.disconnects.load());
  family("kvrouter_replica_nats_reconnects_total", "Times the NATS connection came back (every set then republished its bookings).",
         "counter");
  out += fmt::format("kvrouter_replica_nats_reconnects_total {}\n", counters_.reconnects.load());
  family("kvrouter_replica_messages_sent_total", "Peer messages published (booking batches and snapshot parts).", "counter");
  out += fmt::format("kvrouter_replica_messages_sent_total {}\n", publisher_->counters().sent.load());
  family("kvrouter_replica_messages_received_total", "Peer messages received and handed to their set.", "counter");
  out += fmt::format("kvrouter_replica_messages_received_total {}\n", counters_.received.load());
  family("kvrouter_replica_bytes_total", "Bytes of peer messages, by direction.", "counter");
  out += fmt::format("kvrouter_replica_bytes_total{{direction=\"sent\"}} {}\n", publisher_->counters().sent_bytes.load());
  out += fmt::format("kvrouter_replica_bytes_total{{direction=\"received\"}} {}\n", counters_.received_bytes.load());
  family("kvrouter_replica_messages_dropped_total",
         "Peer messages dropped, by reason (queue_full counts booking steps a set's full backlog dropped; slow_consumer "
         "messages the NATS client dropped because this replica fell 65536 behind; inbox_full messages for a set "
         "whose scorer has 65536 waiting).",
         "counter");
  for (const auto& [reason, count] :
       {std::pair{"malformed", &counters_.malformed}, std::pair{"unknown_set", &counters_.unknown_set},
        std::pair{"echo", &counters_.echo}, std::pair{"inbox_full", &counters_.inbox_full},
        std::pair{"not_connected", &publisher_->counters().not_connected},
        std::pair{"queue_full", &publisher_->counters().queue_full}})
    out += fmt::format("kvrouter_replica_messages_dropped_total{{reason=\"{}\"}} {}\n", reason, count->load());
  out += fmt::format("kvrouter_replica_messages_dropped_total{{reason=\"slow_consumer\"}} {}\n", link_->dropped());
  family("kvrouter_replica_sync_lag_seconds", "From a peer's publish to its message's arrival here (both clocks' wall time).",
         "histogram");
  std::lock_guard lock(lag_mutex_);
  for (std::size_t i = 0; i < latency_histogram::bounds.size(); ++i)
    out += fmt::format("kvrouter_replica_sync_lag_seconds_bucket{{le=\"{}\"}} {}\n", latency_histogram::bounds[i], lag_.cumulative(i));
  out += fmt::format("kvrouter_replica_sync_lag_seconds_bucket{{le=\"+Inf\"}} {}\n", lag_.count());
  out += fmt::format("kvrouter_replica_sync_lag_seconds_sum {}\nkvrouter_replica_sync_lag_seconds_count {}\n", lag_.sum_seconds(),
                     lag_.count());
}

nlohmann::json replica_hub::status() const {
  std::vector<double> lags;
  {
    std::lock_guard lock(lag_mutex_);
    lags = recent_lag_ms_;
  }
  const auto warming = warming_up();
  return {{"replica_id", settings_.replica_id},
          {"nats", settings_.servers},
          {"subject_prefix", settings_.subject_prefix},
          {"connected", connected()},
          {"warm", !warming.has_value()},
          {"messages_sent", publisher_->counters().sent.load()},
          {"messages_received", counters_.received.load()},
          {"bytes_sent", publisher_->counters().sent_bytes.load()},
          {"bytes_received", counters_.received_bytes.load()},
          {"dropped",
           {{"malformed", counters_.malformed.load()},
            {"unknown_set", counters_.unknown_set.load()},
            {"echo", counters_.echo.load()},
            {"inbox_full", counters_.inbox_full.load()},
            {"not_connected", publisher_->counters().not_connected.load()},
            {"queue_full", publisher_->counters().queue_full.load()},
            {"slow_consumer", link_->dropped()}}},
          {"disconnects", counters_.disconnects.load()},
          {"reconnects", counters_.reconnects.load()},
          {"sync_lag_ms", {{"p50", quantile(lags, 0.5)}, {"p99", quantile(lags, 0.99)}, {"samples", lags.size()}}}};
}

}  // namespace kvr
