#pragma once
/// The router's config file: the global router config and the model deployment cards, one per
/// worker set (docs/configuration.md has a complete example). Parsing and validation only;
/// reading the file and watching it live belong to the caller.

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/config/disaggregation.hpp"
#include "core/config/router_config.hpp"
#include "core/config/worker_spec.hpp"

namespace kvr {

/// How many placeholder tokens an image occupies, per model family.
struct multimodal_card {
  std::uint32_t image_token_id = 0;
  std::string rule = "qwen2-vl";      ///< "qwen2-vl" (patch arithmetic) or "fixed"
  std::uint32_t patch_size = 14;
  std::uint32_t merge_size = 2;
  std::uint32_t fixed_tokens = 576;   ///< the "fixed" rule's count (LLaVA-style)
  std::uint64_t min_pixels = 56 * 56;
  std::uint64_t max_pixels = 14 * 14 * 4 * 1280;

  friend bool operator==(const multimodal_card&, const multimodal_card&) = default;
};

/// A model deployment card: one worker set.
struct worker_set_card {
  std::string name;
  std::string model;                     ///< what clients put in "model"
  std::uint32_t block_size = 16;
  std::string tokenizer;                 ///< tokenizer.json path
  std::string tokenizer_config;          ///< tokenizer_config.json path (chat template), or a .jinja file
  /// A chat template that fails to load refuses the set, unless this is set: then chat requests
  /// are rendered as plain `role: content` lines ("chat_template_fallback": "concat").
  bool chat_template_fallback_concat = false;
  std::optional<multimodal_card> multimodal;
  std::vector<worker_spec> workers;
  std::optional<router_config> router_config_override;  ///< the card's "router_config", whole
  /// Prefill/decode disaggregation: the workers' roles form the two pools. None: aggregated.
  std::optional<disaggregation_card> disaggregation;

  friend bool operator==(const worker_set_card&, const worker_set_card&) = default;
};

/// Replica sync over NATS (docs/replicas.md): the file's top-level keys, each the same as a
/// serving flag (`--nats`, `--replica-id`, ...), which wins when both are given. Read at start.
struct replica_file_options {
  std::optional<std::string> nats;  ///< comma-separated nats:// URLs
  std::optional<std::string> replica_id;
  std::optional<std::string> nats_subject_prefix;
  std::optional<std::uint32_t> replica_warmup_ms;

  friend bool operator==(const replica_file_options&, const replica_file_options&) = default;
};

struct router_file {
  router_config router;                  ///< the global config ("router")
  std::vector<worker_set_card> sets;
  replica_file_options replicas;
};

/// A disaggregated set needs a worker for each role, and roles other than `both` need a
/// disaggregated set. Errors name the set (`where`).
[[nodiscard]] std::expected<void, config_error> validate_roles(const std::vector<worker_spec>& workers,
                                                               const std::optional<disaggregation_card>& disaggregation,
                                                               std::string_view where);

/// Parses and validates a config file's text. Errors name the set and key.
[[nodiscard]] std::expected<router_file, config_error> parse_router_file(std::string_view text);
[[nodiscard]] std::expected<router_file, config_error> parse_router_document(const nlohmann::json& document);

/// The set's effective config: its card's `router_config` if present, else the global one;
/// the block size is always the card's.
[[nodiscard]] router_config effective_config(const router_file& file, const worker_set_card& card);

/// What a new config file changes: sets whose card and effective config are unchanged keep
/// running; the others are started (new or changed) or stopped (gone or changed).
/// What a reload does to each set: keep it as it is, retune it in place (only the cost
/// function's weights changed: see retunable_in_place), or stop it and start it anew.
struct reload_plan {
  std::vector<std::string> keep;
  std::vector<std::string> retune;
  std::vector<std::string> start;
  std::vector<std::string> stop;
};
[[nodiscard]] reload_plan plan_reload(const router_file& current, const router_file& next);

/// The card of the set named `name`, or null.
[[nodiscard]] const worker_set_card* card_named(const router_file& file, std::string_view name);

/// `{"sets": [{"name", "model", "effective_router_config", "uses_prefix_overlap",
/// "kv_events_subscribed", "mm_routing_enabled"}]}` (`kvrouter explain`, `/v1/router/sets`).
[[nodiscard]] nlohmann::json explain(const router_file& file);

}  // namespace kvr
