#pragma once
/// KV events as JSON, every field included, for operators' dumps (`kvrouter kv-dump`).
/// 64-bit hashes are written as decimal strings: JSON readers lose precision above 2^53.

#include <nlohmann/json_fwd.hpp>

#include "core/kv/kv_event.hpp"

namespace kvr {

[[nodiscard]] nlohmann::json to_json(const kv_event& event);
/// The batch with its events; `unknown_events` / `malformed_events` only when non-zero.
[[nodiscard]] nlohmann::json to_json(const kv_batch& batch);

}  // namespace kvr
