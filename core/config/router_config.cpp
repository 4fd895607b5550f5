#include "core/config/router_config.hpp"

#include <array>
#include <charconv>
#include <cmath>
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

enum class knob_kind { mode, number, boolean, count };

struct knob {
  knob_info info;
  knob_kind kind;
};

constexpr std::array<knob, 9> knob_table{{
    {{"router_mode", "MODE", "how workers are picked", "kv|round-robin|random|power-of-two|least-loaded"}, knob_kind::mode},
    {{"overlap_score_credit", "NUMBER", "weight of a cached block against a block of prefill work; 0 ignores the cache", ">= 0"}, knob_kind::number},
    {{"prefill_load_scale", "NUMBER", "weight of prefill work against decode work", ">= 0"}, knob_kind::number},
    {{"router_temperature", "NUMBER", "0 picks the cheapest worker; > 0 samples softmax(-cost/T)", ">= 0"}, knob_kind::number},
    {{"use_kv_events", "true|false", "index the workers' KV events; false = approximate mode", "true|false"}, knob_kind::boolean},
    {{"track_active_blocks", "true|false", "count in-flight requests' blocks as decode load", "true|false"}, knob_kind::boolean},
    {{"approx_ttl_secs", "SECONDS", "lifetime of a predicted index entry in approximate mode", ">= 1 in approximate mode"}, knob_kind::count},
    {{"max_index_blocks", "N", "hard bound on (worker, block) index entries per worker set", ">= 1"}, knob_kind::count},
    {{"block_size", "TOKENS", "tokens per KV block, as the engines are configured", ">= 1"}, knob_kind::count},
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
  return config.mode == router_mode::round_robin || config.mode == router_mode::random;
}

bool uses_prefix_overlap(const router_config& config) {
  return config.mode == router_mode::kv && config.overlap_score_credit > 0.0;
}

bool retunable_in_place(const router_config& running, const router_config& next) {
  router_config weights_only = next;
  weights_only.router_temperature = running.router_temperature;
  weights_only.prefill_load_scale = running.prefill_load_scale;
  weights_only.overlap_score_credit = running.overlap_score_credit;
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
  if (!(config.router_temperature >= 0.0) || !std::isfinite(config.router_temperature))
    return fail(fmt::format("router_temperature must be a finite number >= 0 (got {})", config.router_temperature));
  if (config.block_size == 0) return fail("block_size must be at least 1 token (got 0)");
  if (config.max_index_blocks == 0) return fail("max_index_blocks must be at least 1 (got 0)");
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

std::expected<void, config_error> set_knob(router_config& config, std::string_view name, std::string_view value) {
  const knob* k = find_knob(name);
  if (k == nullptr) return std::unexpected(error(fmt::format("unknown router config key \"{}\"", name)));
  switch (k->kind) {
    case knob_kind::mode: {
      auto mode = parse_router_mode(value);
      if (!mode)
        return std::unexpected(error(fmt::format(
            "unknown router_mode \"{}\" (expected kv, round-robin, random, power-of-two or least-loaded)", value)));
      config.mode = *mode;
      return {};
    }
    case knob_kind::number: {
      auto number = parse_number(name, value);
      if (!number) return std::unexpected(number.error());
      if (name == "overlap_score_credit") config.overlap_score_credit = *number;
      else if (name == "prefill_load_scale") config.prefill_load_scale = *number;
      else config.router_temperature = *number;
      return {};
    }
    case knob_kind::boolean: {
      auto flag = parse_bool(name, value);
      if (!flag) return std::unexpected(flag.error());
      (name == "use_kv_events" ? config.use_kv_events : config.track_active_blocks) = *flag;
      return {};
    }
    case knob_kind::count: {
      auto count = parse_count(name, value);
      if (!count) return std::unexpected(count.error());
      if (name == "max_index_blocks") {
        config.max_index_blocks = *count;
        return {};
      }
      if (*count > UINT32_MAX) return std::unexpected(error(fmt::format("{} is too large (got {})", name, *count)));
      (name == "approx_ttl_secs" ? config.approx_ttl_secs : config.block_size) = static_cast<std::uint32_t>(*count);
      return {};
    }
  }
  return {};
}

std::expected<router_config, config_error> router_config_from_json(const nlohmann::json& object, router_config base) {
  if (!object.is_object()) return std::unexpected(error("router config must be a JSON object"));
  for (const auto& [key, value] : object.items()) {
    const knob* k = find_knob(key);
    if (k == nullptr) return std::unexpected(error(fmt::format("unknown router config key \"{}\"", key)));
    std::string text;
    switch (k->kind) {
      case knob_kind::mode:
        if (!value.is_string()) return std::unexpected(error(fmt::format("{} must be a string", key)));
        text = value.get<std::string>();
        break;
      case knob_kind::boolean:
        if (!value.is_boolean()) return std::unexpected(error(fmt::format("{} must be true or false", key)));
        text = value.get<bool>() ? "true" : "false";
        break;
      case knob_kind::number:
        if (!value.is_number()) return std::unexpected(error(fmt::format("{} must be a number", key)));
        text = value.dump();
        break;
      case knob_kind::count:
        if (!value.is_number_integer() || value.get<std::int64_t>() < 0)
          return std::unexpected(error(fmt::format("{} must be a non-negative integer (got {})", key, value.dump())));
        text = value.dump();
        break;
    }
    if (auto set = set_knob(base, key, text); !set) return std::unexpected(set.error());
  }
  return base;
}

nlohmann::json to_json(const router_config& config) {
  return nlohmann::json{
      {"router_mode", std::string(to_string(config.mode))},
      {"overlap_score_credit", config.overlap_score_credit},
      {"prefill_load_scale", config.prefill_load_scale},
      {"router_temperature", config.router_temperature},
      {"use_kv_events", config.use_kv_events},
      {"track_active_blocks", config.track_active_blocks},
      {"approx_ttl_secs", config.approx_ttl_secs},
      {"max_index_blocks", config.max_index_blocks},
      {"block_size", config.block_size},
  };
}

}  // namespace kvr
