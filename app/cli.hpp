#pragma once
/// Command-line parsing for `kvrouter`, from two tables: the router knobs (core/config's knob
/// table, so flags and config-file keys cannot drift apart) and the serving options (app/cli.cpp,
/// whose defaults are the initializers of the settings structs below).

#include <chrono>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <vector>

#include "actors/http/ingress_settings.hpp"
#include "actors/pipeline/pipeline_settings.hpp"
#include "core/config/router_config.hpp"
#include "core/config/worker_spec.hpp"

namespace kvr::cli {

/// Replica sync over NATS (docs/replicas.md), as the flags give it; the config file's keys of
/// the same names fill in what no flag gave.
struct replica_options {
  std::string nats;        ///< --nats: comma-separated nats:// URLs; empty = a lone router
  std::string replica_id;  ///< --replica-id; empty = hostname-pid
  std::string subject_prefix = "kvrouter";
  std::chrono::milliseconds warmup{2000};
  bool nats_given = false, replica_id_given = false, subject_prefix_given = false, warmup_given = false;
};

/// How `kvrouter` serves: where the worker sets come from, and the ingress's and pipelines'
/// settings.
struct serve_options {
  std::string model;                 ///< --model: one set from the command line
  std::vector<std::string> workers;  ///< --worker specs, as given
  std::string config_path;           ///< --config: worker sets from a file instead of --model/--worker
  std::string etcd_url;              ///< --etcd: worker-set cards from etcd under etcd_prefix
  std::string etcd_prefix = "/kvrouter/";
  std::string tokenizer_path;         ///< --tokenizer: the command-line set's tokenizer.json
  std::string tokenizer_config_path;  ///< --tokenizer-config: its chat template
  std::string chat_template_fallback = "none";  ///< none | concat
  std::string disaggregation = "none";          ///< none | vllm-nixl | sglang (the command-line set)
  std::optional<std::uint32_t> image_token_id;  ///< --image-token-id: the command-line set is multimodal
  std::string image_token_rule = "qwen2-vl";    ///< qwen2-vl | fixed
  std::uint32_t image_fixed_tokens = 576;
  std::size_t actor_threads = 0;     ///< CAF scheduler threads; 0 = one per core
  ingress_settings http;             ///< --host, --port, --threads, limits, timeouts
  pipeline_settings pipeline;        ///< hashers, back-off, grace, KV binding, health checks, media
  replica_options replicas;
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

/// One `--worker SPEC` flag of `program` (kvrouter, kvrouter kv-index): parsed, with a warning
/// on stderr for each key of the older spelling it uses (`kv=`, `dp=`).
[[nodiscard]] std::expected<worker_spec, config_error> parse_worker_flag(std::string_view text, std::string_view program);

/// The `--help` text.
[[nodiscard]] std::string usage();

}  // namespace kvr::cli
