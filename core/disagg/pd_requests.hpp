#pragma once
/// The body rewrites of disaggregated serving, as pure functions over bytes (docs/disaggregation.md).
///
/// vLLM with the NIXL connector (as vLLM's own disaggregated proxy does):
///   prefill leg  the client's body with `kv_transfer_params` asking for a remote decode,
///                `stream: false`, `max_tokens: 1` (and `max_completion_tokens: 1` when the
///                body has it), `stream_options` and `min_tokens` removed;
///   decode leg   the client's body as sent plus the `kv_transfer_params` the prefill worker
///                answered with.
/// SGLang: both legs get `bootstrap_host`, `bootstrap_port` and `bootstrap_room` (one room per
/// prompt of a batched `/generate`).
///
/// Every other member of the body keeps its bytes as the client sent them.

#include <cstdint>
#include <expected>
#include <span>
#include <string>
#include <string_view>

namespace kvr {

/// The vLLM prefill leg's body.
[[nodiscard]] std::expected<std::string, std::string> vllm_prefill_body(std::string_view body);

/// The vLLM decode leg's body: `body` with `kv_transfer_params` set to `params` (a JSON object).
[[nodiscard]] std::expected<std::string, std::string> vllm_decode_body(std::string_view body, std::string_view params);

/// Why a prefill answer yields no transfer params.
enum class transfer_params_error : std::uint8_t {
  not_json,       ///< the answer is not a JSON object (or nests too deeply)
  missing,        ///< it has no `kv_transfer_params`, or null
  not_an_object,  ///< it is there, but not an object
};

[[nodiscard]] std::string_view describe(transfer_params_error error);

/// The prefill worker's `kv_transfer_params` (a valid JSON object's bytes, as it sent them).
[[nodiscard]] std::expected<std::string, transfer_params_error> kv_transfer_params_of(std::string_view answer);

/// The number of prompts a request body carries: the length of a batched `/generate`'s `text`
/// or `input_ids` list, else 1 (also for a body that is not a JSON object).
[[nodiscard]] std::size_t prompts_in(std::string_view body);

/// The SGLang body of both legs. `rooms` holds one room per prompt: one room gives scalars,
/// more give lists (a batched `/generate`).
[[nodiscard]] std::expected<std::string, std::string> sglang_body(std::string_view body, std::string_view bootstrap_host,
                                                                  std::uint16_t bootstrap_port,
                                                                  std::span<const std::uint64_t> rooms);

/// Whether a completion body asks for more than one choice (`n` > 1, or `best_of` > 1): such
/// requests run aggregated.
[[nodiscard]] bool asks_for_several_choices(std::string_view body);

}  // namespace kvr
