#pragma once
/// Command-line parsing for `kvrouter`: the router-config flags are generated from the knob
/// table in core/config/router_config, so flags and config-file keys cannot drift apart.

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <vector>

#include "core/config/router_config.hpp"

namespace kvr::cli {

/// Serving one worker set from the command line (`kvrouter --model M --worker ...`).
struct serve_options {
  std::string model;
  std::vector<std::string> workers;  ///< worker specs, as given
  std::string host = "0.0.0.0";
  std::uint16_t port = 8080;
  std::size_t io_threads = 0;        ///< 0 = one per core
  std::size_t actor_threads = 2;
  std::size_t hashers = 2;
  std::uint64_t max_body_bytes = 32u << 20;
  std::uint32_t max_retries = 2;
  std::uint32_t client_timeout_secs = 60;
  std::uint32_t upstream_timeout_secs = 600;
  std::uint32_t unhealthy_backoff_ms = 5000;
  std::string kv_bind;               ///< bind one SUB here instead of connecting to kv= endpoints
  std::string config_path;           ///< --config: worker sets from a file instead of --model/--worker
  std::uint32_t health_interval_ms = 2000;  ///< active health checks; 0 = off
  std::uint32_t health_timeout_ms = 1000;
  std::uint32_t health_failures = 2;
  std::uint32_t health_successes = 1;
  bool media_allow_private = false;          ///< --media-allow-private: image URLs may be loopback / private
  std::uint64_t media_timeout_ms = 10000;    ///< --media-timeout-ms
  std::uint64_t media_cache_entries = 4096;  ///< --media-cache-entries
  std::uint64_t media_cache_ttl_secs = 600;  ///< --media-cache-ttl-secs
  std::uint64_t media_max_concurrent = 32;   ///< --media-max-concurrent
  std::string media_ca_file;                 ///< --media-ca-file
  std::uint32_t index_grace_secs = 60;
  std::string tokenizer_path;        ///< --tokenizer: the command-line set's tokenizer.json
  std::string tokenizer_config_path; ///< --tokenizer-config: its chat template
  bool chat_template_fallback_concat = false;  ///< --chat-template-fallback concat
  std::optional<std::uint32_t> image_token_id;  ///< --image-token-id: the command-line set is multimodal
  std::string image_token_rule = "qwen2-vl";     ///< --image-token-rule qwen2-vl | fixed
  std::uint32_t image_fixed_tokens = 576;        ///< --image-fixed-tokens
  std::string etcd_url;              ///< --etcd: worker-set cards from etcd under etcd_prefix
  std::string etcd_prefix = "/kvrouter/";
};

struct options {
  std::string command;            ///< first positional argument ("" = none)
  router_config router;           ///< global router config from flags over defaults
  bool router_flags_given = false;
  serve_options serve;
  bool help = false;
};

/// Parses `args` (without the program name). Errors name the offending flag.
[[nodiscard]] std::expected<options, std::string> parse(const std::vector<std::string>& args);

/// The `--help` text.
[[nodiscard]] std::string usage();

}  // namespace kvr::cli
