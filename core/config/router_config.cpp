#include "core/config/router_config.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <type_traits>
#include <variant>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace kvr {
namespace {

constexpr std::array<std::pair<router_mode, std::string_view>, 5> mode_names{{
    {router_mode::kv, "kv"},
    {router_mode::round_robin, "round-robin"},
    {router_mode::random, "random"},
    {router_mode::power_of_two, "power-of-two"},
    {router_mode::least_loaded, "least-loaded"},
}};

/// Where a knob's value lives in `router_config`; the mode is the one enum-valued knob.
using knob_field = std::variant<router_mode router_config::*, double router_config::*, bool router_config::*,
                                std::uint32_t router_config::*, std::uint64_t router_config::*,
                                kv_tier_weights router_config::*>;

struct knob {
  knob_info info;
  knob_field field;
};

using rc = router_config;
const std::array<knob, 25> knob_table{{
    {{"router_mode", "MODE", "how workers are picked", "kv|round-robin|random|power-of-two|least-loaded"}, &rc::mode},
    {{"overlap_score_credit", "NUMBER", "weight of a cached block against a block of prefill work; 0 ignores the cache", ">= 0"}, &rc::overlap_score_credit},
    {{"prefill_load_scale", "NUMBER", "weight of prefill work against decode work", ">= 0"}, &rc::prefill_load_scale},
    {{"eviction_weight", "NUMBER", "weight of each cached block a placement would evict (new blocks beyond the worker's free cache) against a block of prefill work", ">= 0"}, &rc::eviction_weight},
    {{"router_temperature", "NUMBER", "0 picks the cheapest worker; > 0 samples softmax(-cost/T)", ">= 0"}, &rc::router_temperature},
    {{"use_kv_events", "true|false", "index the workers' KV events; false = approximate mode", "true|false"}, &rc::use_kv_events},
    {{"track_active_blocks", "true|false", "count in-flight requests' blocks as decode load", "true|false"}, &rc::track_active_blocks},
    {{"approx_ttl_secs", "SECONDS", "lifetime of a predicted index entry in approximate mode", ">= 1 in approximate mode"}, &rc::approx_ttl_secs},
    {{"max_index_blocks", "N", "hard bound on (worker, block) index entries per worker set", ">= 1"}, &rc::max_index_blocks},
    {{"block_size", "TOKENS", "tokens per KV block, as the engines are configured", ">= 1"}, &rc::block_size},
    {{"busy_threshold", "NUMBER", "a worker is busy beyond this many batches of booked prefill tokens (or with waiting requests, where engine queues are obeyed: engine_waiting_busy); requests wait in the set's queue while every worker is busy; 0 = no queue", ">= 0"}, &rc::busy_threshold},
    {{"engine_waiting_busy", "true|false", "kv mode: a worker whose engine reports waiting requests is busy (passed over while another is free); false prices the queue instead (engine_queue_weight); other modes always treat it as busy", "true|false"}, &rc::engine_waiting_busy},
    {{"engine_queue_weight", "NUMBER", "kv mode: each request an engine reports waiting beyond this router's unstarted ones there costs this many of the routed prompt's blocks of prefill", ">= 0"}, &rc::engine_queue_weight},
    {{"max_num_batched_tokens", "TOKENS", "the engines' prefill batch size (vLLM --max-num-batched-tokens)", ">= 1"}, &rc::max_num_batched_tokens},
    {{"queue_size", "N", "requests a set's queue holds; beyond, 429 queue_full", ">= 1"}, &rc::queue_size},
    {{"queue_timeout_secs", "SECONDS", "longest wait in the queue; beyond, 503 queue_timeout", ">= 1"}, &rc::queue_timeout_secs},
    {{"queue_age_boost_secs", "SECONDS", "a queued request moves up one priority class after waiting this long", ">= 1"}, &rc::queue_age_boost_secs},
    {{"session_affinity_ttl_secs", "N", "seconds a conversation's turns (session header or user) go to the worker that served it after its last; 0 = off", ">= 0"}, &rc::session_affinity_ttl_secs},
    {{"session_affinity_slack", "BLOCKS", "leave the bound worker when its cost exceeds the best by more than this", ">= 0"}, &rc::session_affinity_slack},
    {{"migration_limit", "N", "times a streamed answer whose worker fails mid-way is continued on another worker; 0 = off", ">= 0"}, &rc::migration_limit},
    {{"migration_max_seq_len", "TOKENS", "longest prompt + answer so far a continuation may carry; 0 = no bound but the engine's", ">= 0"}, &rc::migration_max_seq_len},
    {{"migration_whole_answers", "BOOL", "non-streamed chats and completions are streamed from the worker and gathered, so that they can be continued too; false (the default) sends them as the client did", "true|false"}, &rc::migration_whole_answers},
    {{"tier_weights", "TIERS", "kv mode: what a cached block on each tier is worth against a GPU hit (blocks engines publish on host memory, disk or an external store); TIERS is gpu=W,host=W,disk=W,external=W; names not given keep their default", "each in [0, 1]"}, &rc::tier_weights},
    {{"lower_tier_ttl_secs", "SECONDS", "a worker's blocks on a tier that never sent a removal (LMCache) are forgotten this long after they were stored; 0 = only the bound removes them", ">= 0"}, &rc::lower_tier_ttl_secs},
    {{"max_lower_tier_blocks", "N", "bound on (worker, block) pairs per lower tier of a set; the oldest go first", ">= 1"}, &rc::max_lower_tier_blocks},
}};

const std::array<knob_info, knob_table.size()> knob_infos = [] {
  std::array<knob_info, knob_table.size()> infos{};
  for (std::size_t i = 0; i < knob_table.size(); ++i) infos[i] = knob_table[i].info;
  return infos;
}();

const knob* find_knob(std::string_view name) {
  for (const knob& k : knob_table)
    if (k.info.name == name) return &k;
  return nullptr;
}

config_error error(std::string message) { return config_error{std::move(message)}; }

std::expected<double, config_error> parse_number(std::string_view name, std::string_view text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(value))
    return std::unexpected(error(fmt::format("{} expects a number, got \"{}\"", name, text)));
  return value;
}

std::expected<std::uint64_t, config_error> parse_count(std::string_view name, std::string_view text) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size())
    return std::unexpected(error(fmt::format("{} expects a non-negative integer, got \"{}\"", name, text)));
  return value;
}

std::expected<bool, config_error> parse_bool(std::string_view name, std::string_view text) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  return std::unexpected(error(fmt::format("{} expects true or false, got \"{}\"", name, text)));
}

}  // namespace

std::string_view to_string(router_mode mode) {
  for (auto [m, name] : mode_names)
    if (m == mode) return name;
  return "unknown";
}

std::optional<router_mode> parse_router_mode(std::string_view text) {
  for (auto [m, name] : mode_names)
    if (name == text) return m;
  return std::nullopt;
}

router_config load_aware_preset(router_config base) {
  base.mode = router_mode::kv;
  base.overlap_score_credit = 0.0;
  base.use_kv_events = false;
  return base;
}

bool decides_without_state(const router_config& config) {
  // A queue needs the bookings, session bindings their table: only the scorer holds them.
  return (config.mode == router_mode::round_robin || config.mode == router_mode::random) && !queues_when_busy(config) &&
         config.session_affinity_ttl_secs == 0;
}

bool queues_when_busy(const router_config& config) { return config.busy_threshold > 0.0; }

bool uses_prefix_overlap(const router_config& config) {
  return config.mode == router_mode::kv && config.overlap_score_credit > 0.0;
}

bool retunable_in_place(const router_config& running, const router_config& next) {
  router_config weights_only = next;
  weights_only.router_temperature = running.router_temperature;
  weights_only.prefill_load_scale = running.prefill_load_scale;
  weights_only.overlap_score_credit = running.overlap_score_credit;
  weights_only.eviction_weight = running.eviction_weight;
  weights_only.busy_threshold = running.busy_threshold;
  weights_only.engine_waiting_busy = running.engine_waiting_busy;
  weights_only.engine_queue_weight = running.engine_queue_weight;
  weights_only.max_num_batched_tokens = running.max_num_batched_tokens;
  weights_only.queue_size = running.queue_size;
  weights_only.queue_timeout_secs = running.queue_timeout_secs;
  weights_only.queue_age_boost_secs = running.queue_age_boost_secs;
  weights_only.session_affinity_ttl_secs = running.session_affinity_ttl_secs;
  weights_only.session_affinity_slack = running.session_affinity_slack;
  weights_only.migration_limit = running.migration_limit;
  weights_only.migration_max_seq_len = running.migration_max_seq_len;
  weights_only.migration_whole_answers = running.migration_whole_answers;
  weights_only.tier_weights = running.tier_weights;
  weights_only.lower_tier_ttl_secs = running.lower_tier_ttl_secs;
  return weights_only == running && uses_prefix_overlap(running) == uses_prefix_overlap(next);
}

bool should_subscribe_to_kv_events(const router_config& config) {
  return uses_prefix_overlap(config) && config.use_kv_events;
}

std::expected<void, config_error> validate(const router_config& config) {
  auto fail = [](std::string message) { return std::unexpected(error(std::move(message))); };
  if (!(config.overlap_score_credit >= 0.0) || !std::isfinite(config.overlap_score_credit))
    return fail(fmt::format("overlap_score_credit must be a finite number >= 0 (got {})", config.overlap_score_credit));
  if (!(config.prefill_load_scale >= 0.0) || !std::isfinite(config.prefill_load_scale))
    return fail(fmt::format("prefill_load_scale must be a finite number >= 0 (got {})", config.prefill_load_scale));
  if (!(config.eviction_weight >= 0.0) || !std::isfinite(config.eviction_weight))
    return fail(fmt::format("eviction_weight must be a finite number >= 0 (got {})", config.eviction_weight));
  if (!(config.router_temperature >= 0.0) || !std::isfinite(config.router_temperature))
    return fail(fmt::format("router_temperature must be a finite number >= 0 (got {})", config.router_temperature));
  if (!(config.busy_threshold >= 0.0) || !std::isfinite(config.busy_threshold))
    return fail(fmt::format("busy_threshold must be a finite number >= 0 (got {})", config.busy_threshold));
  if (!(config.engine_queue_weight >= 0.0) || !std::isfinite(config.engine_queue_weight))
    return fail(fmt::format("engine_queue_weight must be a finite number >= 0 (got {})", config.engine_queue_weight));
  if (!(config.session_affinity_slack >= 0.0) || !std::isfinite(config.session_affinity_slack))
    return fail(fmt::format("session_affinity_slack must be a finite number >= 0 (got {})", config.session_affinity_slack));
  if (config.max_num_batched_tokens == 0) return fail("max_num_batched_tokens must be at least 1 token (got 0)");
  if (config.queue_size == 0) return fail("queue_size must be at least 1 (got 0); busy_threshold 0 turns the queue off");
  if (config.queue_timeout_secs == 0) return fail("queue_timeout_secs must be at least 1 (got 0)");
  if (config.queue_age_boost_secs == 0) return fail("queue_age_boost_secs must be at least 1 (got 0)");
  if (config.block_size == 0) return fail("block_size must be at least 1 token (got 0)");
  if (config.max_index_blocks == 0) return fail("max_index_blocks must be at least 1 (got 0)");
  if (config.max_lower_tier_blocks == 0) return fail("max_lower_tier_blocks must be at least 1 (got 0)");
  if (config.approx_ttl_secs == 0 && uses_prefix_overlap(config) && !config.use_kv_events)
    return fail("approx_ttl_secs must be at least 1 in approximate mode (got 0)");
  return {};
}

router_config resolve_effective_config(const router_config& global, const std::optional<router_config>& card_override,
                                       std::uint32_t card_block_size) {
  router_config effective = card_override.value_or(global);
  effective.block_size = card_block_size;
  return effective;
}

std::span<const knob_info> knobs() { return knob_infos; }

std::expected<kv_tier_weights, std::string> parse_tier_weights(std::string_view text, kv_tier_weights base) {
  kv_tier_weights weights = base;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const std::size_t equals = item.find('=');
    if (equals == std::string_view::npos) return std::unexpected(fmt::format("\"{}\" is not TIER=WEIGHT", item));
    const std::string_view name = item.substr(0, equals);
    double* weight = name == "gpu" ? &weights.gpu : name == "host" ? &weights.host : name == "disk" ? &weights.disk
                     : name == "external" ? &weights.external : nullptr;
    if (weight == nullptr) return std::unexpected(fmt::format("unknown tier \"{}\" (expected gpu, host, disk or external)", name));
    const std::string number(item.substr(equals + 1));
    char* end = nullptr;
    const double value = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !std::isfinite(value) || value < 0 || value > 1)
      return std::unexpected(fmt::format("the weight of {} must be a number in [0, 1] (got \"{}\")", name, number));
    *weight = value;
  }
  return weights;
}

std::string to_string(const kv_tier_weights& w) {
  return fmt::format("gpu={},host={},disk={},external={}", w.gpu, w.host, w.disk, w.external);
}

std::expected<void, config_error> set_knob(router_config& config, std::string_view name, std::string_view value) {
  const knob* k = find_knob(name);
  if (k == nullptr) return std::unexpected(error(fmt::format("unknown router config key \"{}\"", name)));
  return std::visit(
      [&]<class T>(T router_config::*field) -> std::expected<void, config_error> {
        if constexpr (std::is_same_v<T, router_mode>) {
          auto mode = parse_router_mode(value);
          if (!mode)
            return std::unexpected(error(fmt::format(
                "unknown router_mode \"{}\" (expected kv, round-robin, random, power-of-two or least-loaded)", value)));
          config.*field = *mode;
        } else if constexpr (std::is_same_v<T, double>) {
          auto number = parse_number(name, value);
          if (!number) return std::unexpected(number.error());
          config.*field = *number;
        } else if constexpr (std::is_same_v<T, kv_tier_weights>) {
          auto weights = parse_tier_weights(value, config.*field);
          if (!weights) return std::unexpected(error(fmt::format("tier_weights: {}", weights.error())));
          config.*field = *weights;
        } else if constexpr (std::is_same_v<T, bool>) {
          auto flag = parse_bool(name, value);
          if (!flag) return std::unexpected(flag.error());
          config.*field = *flag;
        } else {
          auto count = parse_count(name, value);
          if (!count) return std::unexpected(count.error());
          if (*count > std::numeric_limits<T>::max())
            return std::unexpected(error(fmt::format("{} is too large (got {})", name, *count)));
          config.*field = static_cast<T>(*count);
        }
        return {};
      },
      k->field);
}

std::expected<router_config, config_error> router_config_from_json(const nlohmann::json& object, router_config base) {
  if (!object.is_object()) return std::unexpected(error("router config must be a JSON object"));
  for (const auto& [key, value] : object.items()) {
    const knob* k = find_knob(key);
    if (k == nullptr) return std::unexpected(error(fmt::format("unknown router config key \"{}\"", key)));
    auto text = std::visit(
        [&]<class T>(T router_config::*) -> std::expected<std::string, config_error> {
          if constexpr (std::is_same_v<T, router_mode>) {
            if (!value.is_string()) return std::unexpected(error(fmt::format("{} must be a string", key)));
            return value.get<std::string>();
          } else if constexpr (std::is_same_v<T, kv_tier_weights>) {
            // A string as on the command line, or an object of the tiers' weights.
            if (value.is_string()) return value.get<std::string>();
            if (!value.is_object()) return std::unexpected(error(fmt::format("{} must be a string or an object", key)));
            std::string text;
            for (const auto& [tier, weight] : value.items()) {
              if (!weight.is_number()) return std::unexpected(error(fmt::format("{}.{} must be a number", key, tier)));
              text += (text.empty() ? "" : ",") + tier + "=" + weight.dump();
            }
            return text;
          } else if constexpr (std::is_same_v<T, bool>) {
            if (!value.is_boolean()) return std::unexpected(error(fmt::format("{} must be true or false", key)));
            return value.get<bool>() ? "true" : "false";
          } else if constexpr (std::is_same_v<T, double>) {
            if (!value.is_number()) return std::unexpected(error(fmt::format("{} must be a number", key)));
            return value.dump();
          } else {
            if (!value.is_number_unsigned())
              return std::unexpected(error(fmt::format("{} must be a non-negative integer (got {})", key, value.dump())));
            return value.dump();
          }
        },
        k->field);
    if (!text) return std::unexpected(text.error());
    if (auto set = set_knob(base, key, *text); !set) return std::unexpected(set.error());
  }
  return base;
}

nlohmann::json to_json(const router_config& config) {
  nlohmann::json object = nlohmann::json::object();
  for (const knob& k : knob_table)
    std::visit(
        [&]<class T>(T router_config::*field) {
          if constexpr (std::is_same_v<T, router_mode> || std::is_same_v<T, kv_tier_weights>)
            object[std::string(k.info.name)] = std::string(to_string(config.*field));
          else object[std::string(k.info.name)] = config.*field;
        },
        k.field);
  return object;
}

}  // namespace kvr
