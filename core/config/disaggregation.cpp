#include "core/config/disaggregation.hpp"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kvr {

std::string_view to_string(pd_protocol protocol) {
  return protocol == pd_protocol::sglang ? "sglang" : "vllm-nixl";
}

std::optional<pd_protocol> parse_pd_protocol(std::string_view text) {
  if (text == "vllm-nixl") return pd_protocol::vllm_nixl;
  if (text == "sglang") return pd_protocol::sglang;
  return std::nullopt;
}

std::string_view to_string(missing_params_policy policy) {
  return policy == missing_params_policy::fail ? "fail" : "aggregate";
}

std::expected<disaggregation_card, config_error> parse_disaggregation(const nlohmann::json& object, std::string_view where) {
  auto fail = [&](std::string why) { return std::unexpected(config_error{fmt::format("{}: disaggregation: {}", where, why)}); };
  if (!object.is_object()) return fail("must be an object such as {\"protocol\": \"vllm-nixl\"}");
  disaggregation_card card;
  bool has_protocol = false;
  for (const auto& [key, value] : object.items()) {
    if (key == "protocol") {
      const auto protocol = value.is_string() ? parse_pd_protocol(value.get_ref<const std::string&>()) : std::nullopt;
      if (!protocol) return fail(fmt::format("\"protocol\" must be \"vllm-nixl\" or \"sglang\" (got {})", value.dump()));
      card.protocol = *protocol;
      has_protocol = true;
    } else if (key == "missing_params") {
      if (value == "aggregate") card.missing_params = missing_params_policy::aggregate;
      else if (value == "fail") card.missing_params = missing_params_policy::fail;
      else return fail(fmt::format("\"missing_params\" must be \"aggregate\" or \"fail\" (got {})", value.dump()));
    } else if (key == "decode_overlap_credit") {
      if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0 || value.get<double>() > 100)
        return fail(fmt::format("\"decode_overlap_credit\" must be a number from 0 to 100 (got {})", value.dump()));
      card.decode_overlap_credit = value.get<double>();
    } else if (key == "max_local_prefill_tokens") {
      if (!value.is_number_unsigned() || value.get<std::uint64_t>() > UINT32_MAX)
        return fail(fmt::format("\"max_local_prefill_tokens\" must be a token count (got {})", value.dump()));
      card.max_local_prefill_tokens = value.get<std::uint32_t>();
    } else {
      return fail(fmt::format("unknown key \"{}\" (expected protocol, missing_params, decode_overlap_credit or "
                              "max_local_prefill_tokens)",
                              key));
    }
  }
  if (!has_protocol) return fail("\"protocol\" is required (\"vllm-nixl\" or \"sglang\")");
  return card;
}

nlohmann::json to_json(const disaggregation_card& card) {
  return {{"protocol", to_string(card.protocol)},
          {"missing_params", to_string(card.missing_params)},
          {"decode_overlap_credit", card.decode_overlap_credit},
          {"max_local_prefill_tokens", card.max_local_prefill_tokens}};
}

}  // namespace kvr
