#pragma once
/// Encodes KV-event batches as engines publish them (the inverse of core/kv/kv_wire), for the
/// simulated engine and for benchmarks: vLLM's array form (up to ~0.23), its map form (~0.24
/// and later), and SGLang's array form with signed int64 hashes. Hashes may also go out as
/// 32-byte bin digests (vLLM with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0), whose last 8 bytes
/// big-endian are the u64 identity. Images of stored blocks go out in `extra_keys` as
/// `[identifier, offset]` per block (vLLM's shape; SGLang's form has no extra_keys).

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/kv/kv_event.hpp"

namespace kvr {

enum class kv_event_format : std::uint8_t { vllm_array, vllm_map, sglang };

[[nodiscard]] std::optional<kv_event_format> parse_kv_event_format(std::string_view name);
[[nodiscard]] std::string_view to_string(kv_event_format format);

struct kv_encode_options {
  kv_event_format format = kv_event_format::vllm_array;
  bool bin_hashes = false;  ///< hashes as 32-byte digests instead of integers
};

/// One batch's payload: `[ts, events, dp_rank]` (dp_rank nil when absent).
[[nodiscard]] std::vector<std::uint8_t> encode_kv_batch(const kv_batch& batch, const kv_encode_options& options = {});

}  // namespace kvr
