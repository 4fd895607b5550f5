#pragma once
/// The batch shape vLLM publishes, decoded in one bounds-checked pass over the bytes.
///
/// Why a second reader beside `kv_wire`'s: the general decoder first checks the whole payload
/// (`mp_parse`) and then walks it through `mp_ref` values, which decode each header twice and
/// return 32-byte values through memory; on the payloads a cluster sends millions of times a
/// second that was half of decode + apply. This reader reads each byte once, straight into
/// the batch, and declines everything but the common shape. A declined payload goes to the
/// general decoder, which gives it its answer, so the two agree on every payload this one
/// accepts (the kv_wire fuzz target holds them equal).
///
/// Accepted: the array envelope `[ts, events]` or `[ts, events, dp_rank]` with a float or nil
/// `ts`; array-form events only: `BlockStored` with its 4 to 11 positional fields (hashes as
/// integers, token ids as unsigned integers below 2^32, `lora_name` nil or a string,
/// `extra_keys` nil or all nils), `BlockRemoved` with 1 to 3 fields, `AllBlocksCleared` alone.
/// Declined: map envelopes and map events, bin hashes, images, cache salts, EAGLE token pairs,
/// SGLang's metadata map, fields newer than `kv_cache_spec_sliding_window`, unknown tags, and
/// anything malformed.

#include <cstdint>
#include <span>

#include "core/kv/kv_event.hpp"

namespace kvr {

/// Decodes `payload` into `out` when it has the common shape and returns true; returns false
/// (leaving `out` in an unspecified state) when it does not.
[[nodiscard]] bool decode_common_batch(std::span<const std::uint8_t> payload, kv_batch& out);

}  // namespace kvr
