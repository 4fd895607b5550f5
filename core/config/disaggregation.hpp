#pragma once
/// A worker set's prefill/decode disaggregation (docs/disaggregation.md): which engines'
/// protocol hands a prompt's KV from the prefill worker to the decode worker, and the rules for
/// when a request runs aggregated instead. The card's `"disaggregation"` object, or
/// `--disaggregation PROTOCOL` for the command-line set.

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "core/config/router_config.hpp"

namespace kvr {

enum class pd_protocol : std::uint8_t {
  /// vLLM with the NIXL connector: the prefill leg runs first (one token, no stream) and its
  /// answer's `kv_transfer_params` tell the decode worker where to pull the KV from.
  vllm_nixl,
  /// SGLang: both legs start at once with the same bootstrap room; the prefill worker pushes.
  sglang,
};

/// What a vLLM prefill answer without `kv_transfer_params` leads to.
enum class missing_params_policy : std::uint8_t {
  aggregate,  ///< run the request whole on the decode worker (counted)
  fail,       ///< answer 502 (counted)
};

struct disaggregation_card {
  pd_protocol protocol = pd_protocol::vllm_nixl;
  missing_params_policy missing_params = missing_params_policy::aggregate;
  /// Credit for the decode worker's own cached prefix (as `overlap_score_weight` for the
  /// prefill side). 0: decode workers are chosen on load alone; they pull what they lack.
  double decode_overlap_credit = 0.0;
  /// Conditional disaggregation: a prompt whose uncached part on the chosen decode worker is
  /// below this many tokens runs there aggregated. 0 = always disaggregate.
  std::uint32_t max_local_prefill_tokens = 0;

  friend bool operator==(const disaggregation_card&, const disaggregation_card&) = default;
};

[[nodiscard]] std::string_view to_string(pd_protocol protocol);
[[nodiscard]] std::optional<pd_protocol> parse_pd_protocol(std::string_view text);
[[nodiscard]] std::string_view to_string(missing_params_policy policy);

/// Parses a card's `"disaggregation"` object; errors name `where` and the key.
[[nodiscard]] std::expected<disaggregation_card, config_error> parse_disaggregation(const nlohmann::json& object,
                                                                                   std::string_view where);
[[nodiscard]] nlohmann::json to_json(const disaggregation_card& card);

}  // namespace kvr
