#pragma once
/// Batches encoded as vLLM ~0.13-0.23 publishes them (array form), for benchmarks that need
/// realistic payloads.

#include <vector>

#include "core/kv/kv_encode.hpp"

namespace kvr::bench {

inline std::vector<std::uint8_t> encode_batch(const std::vector<kv_event>& events) {
  return encode_kv_batch(kv_batch{.timestamp = 1.5, .dp_rank = 0, .events = events});
}

}  // namespace kvr::bench
