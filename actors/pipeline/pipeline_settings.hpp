#pragma once
/// How every worker set's pipeline is built: the hashers, the scorer's health rules, the KV
/// subscription topology, active health checks and the media fetcher. Plain values with their
/// defaults (the command line's defaults are these: app/cli.cpp reads and prints them).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

namespace kvr {

class replica_hub;

/// Active health checks (actors/sources/health_checker).
struct health_settings {
  std::chrono::milliseconds interval{2000};
  std::chrono::milliseconds timeout{1000};
  std::uint32_t failures = 2;   ///< consecutive failed probes before a worker is down
  std::uint32_t successes = 1;  ///< consecutive good probes before it is up again
};

/// Engine-metrics scrapes (actors/sources/engine_scraper): `GET /metrics` on every worker.
struct engine_metrics_settings {
  std::chrono::milliseconds interval{1000};  ///< 0 = off
  std::chrono::milliseconds timeout{1000};
};

/// The media fetchers of multimodal sets that score overlap (actors/pipeline/media_fetcher).
struct media_fetch_settings {
  std::chrono::milliseconds timeout{10000};  ///< per fetch, redirects included
  std::size_t max_concurrent = 32;
  std::size_t cache_entries = 4096;
  std::chrono::seconds cache_ttl{600};
  bool allow_private = false;  ///< --media-allow-private: loopback and private addresses too
  std::size_t max_redirects = 3;
  std::string ca_file;  ///< --media-ca-file: trust these certificates too (besides the system's)
};

/// How every set's pipeline is built.
struct pipeline_settings {
  /// Tokenizing and rendering, the costliest work of a chat request, runs on the hashers:
  /// one per core by default (0), so that it is spread over every core the scheduler has.
  std::size_t hashers = 0;
  std::chrono::milliseconds unhealthy_backoff{5000};
  std::chrono::seconds index_grace{60};
  std::string kv_bind;        ///< bind one KV-event SUB here instead of connecting to kv_events= endpoints
  /// KV-event decoder threads per set (--kv-decoders); 0 = auto (kv_decoder_threads, actors/sources/kv_subscriber).
  std::size_t kv_decoders = 0;
  health_settings health;     ///< interval 0 = no active health checks
  engine_metrics_settings engine_metrics;  ///< interval 0 = no scrapes
  /// A component that died (KV subscriber, health checker, media fetcher, or the set's scorer or
  /// hashers) is restarted after this, doubling while it keeps dying (at most 10 s).
  std::chrono::milliseconds restart_backoff{200};
  /// Prompts longer than this (tokens, images expanded) are refused with 400; serve sets it
  /// from --max-prompt-tokens (ingress_settings holds the default).
  std::size_t max_prompt_tokens = SIZE_MAX;
  media_fetch_settings media;  ///< the media fetchers of multimodal sets that score overlap
  /// Trust for https:// workers' health and metrics polls besides the system's CAs (serve
  /// copies --worker-ca-file here from ingress_settings).
  std::string worker_ca_file;
  /// Replica sync over NATS (--nats; null: a lone router): every set shares its bookings.
  std::shared_ptr<replica_hub> replicas;
};

}  // namespace kvr
