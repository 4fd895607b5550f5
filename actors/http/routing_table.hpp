#pragma once
/// The immutable table ingress routes by: model -> worker set (its actors, effective config,
/// workers). Built when the set of worker sets changes, swapped in whole.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/http/migration_counters.hpp"
#include "actors/pipeline/hasher.hpp"
#include "actors/pipeline/scorer.hpp"
#include "actors/sources/engine_scraper.hpp"
#include "core/config/disaggregation.hpp"
#include "core/config/router_config.hpp"
#include "core/config/worker_spec.hpp"
#include "core/prompt/prompt_plan.hpp"

namespace kvr {

/// A worker as ingress proxies to it.
struct worker_target {
  std::string name;
  std::string url;        ///< base URL, e.g. http://10.0.0.5:8000 (a path prefix is kept)
  std::string host;       ///< as the resolver takes it (IPv6 without brackets)
  std::string port;
  std::string base_path;  ///< "" or e.g. "/engine-a"
  std::string host_header;  ///< "host:port" ("[v6]:port"), sent as Host
  bool tls = false;         ///< an https:// worker (actors/tls/worker_tls.hpp)
  std::uint16_t bootstrap_port = default_bootstrap_port;  ///< an SGLang prefill worker's bootstrap server
};

/// Splits `http://host:port/prefix` (IPv6 hosts in brackets) into a target; why not, on a bad URL.
[[nodiscard]] std::expected<worker_target, std::string> make_worker_target(std::string name, const std::string& url);

/// A supervised component of a set as the last table saw it.
struct component_status {
  std::string name;
  bool running = true;        ///< false while it waits for its restart (the set is degraded)
  std::uint64_t restarts = 0;
};

struct worker_set_route {
  std::string name;
  std::string model;
  router_config config;  ///< the set's effective config
  std::optional<disaggregation_card> disaggregation;  ///< none: an aggregated set
  std::vector<worker_target> workers;
  scorer_actor scorer;
  /// The scorer's routing state: ingress decides there itself when it is free.
  std::shared_ptr<scorer_core> scoring;
  std::vector<hasher_actor> hashers;  ///< empty: the set does not score prefix overlap
  prompt_capabilities prompts;        ///< what the hashers can hash (none where there are none)
  /// The hashers' tokenizer and chat template, read-only: ingress answers /tokenize and
  /// /detokenize with them (null where the set has no hashers or no tokenizer).
  std::shared_ptr<const tokenizer> text_tokenizer;
  std::shared_ptr<const chat_template> chat;
  bool chat_plain_fallback = false;
  bool fetches_media = false;         ///< the set has a media fetcher (multimodal, overlap scored)
  /// The hashers' counters; every set has them, at zero where the gate spawns no hashers.
  std::shared_ptr<kvr::hasher_counters> hashing = std::make_shared<kvr::hasher_counters>();
  /// The engine-metrics scraper's counters (zero where scrapes are off).
  std::shared_ptr<engine_scrape_counters> scrapes = std::make_shared<engine_scrape_counters>();
  std::shared_ptr<scorer_snapshot_cell> snapshot;
  /// Per KV decoder thread, true once its publishers' warm-start replays ended (none: a set
  /// without KV events).
  std::vector<std::shared_ptr<std::atomic<bool>>> kv_warm;
  [[nodiscard]] bool kv_replays_done() const {
    return std::all_of(kv_warm.begin(), kv_warm.end(), [](const auto& done) { return done->load(); });
  }
  std::vector<component_status> components;  ///< the set's supervised components
  std::uint64_t restarts = 0;                ///< restarts of the whole set (its scorer or a hasher died)
  /// Routing decisions in flight (ingress bounds it; beyond, 503 at once).
  std::shared_ptr<std::atomic<std::uint32_t>> routing_in_flight = std::make_shared<std::atomic<std::uint32_t>>(0);
  /// Its streams continued on another worker (actors/http/stream_migration.hpp), for /metrics.
  std::shared_ptr<ingress::migration_counters> migrations = std::make_shared<ingress::migration_counters>();
  /// Round-robin position shared by the I/O threads (round-robin is decided in ingress).
  std::shared_ptr<std::atomic<std::uint64_t>> round_robin_ticket = std::make_shared<std::atomic<std::uint64_t>>(0);
};

struct routing_table {
  std::vector<worker_set_route> sets;
  std::string sets_json = R"({"sets":[]})";  ///< `GET /v1/router/sets`: what `kvrouter explain` prints

  [[nodiscard]] const worker_set_route* find(std::string_view model) const {
    for (const worker_set_route& set : sets)
      if (set.model == model) return &set;
    return nullptr;
  }
};

}  // namespace kvr
