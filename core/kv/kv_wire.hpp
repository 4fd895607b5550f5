#pragma once
/// msgpack bytes -> KV event batch, for every shape vLLM and SGLang publish
/// (docs/kv-events.md in shared/, summarized in docs/kv-events.md here):
/// array and map events (mixed in one batch), 2- / 3-element and map envelopes, uint64 / int64
/// / bin hashes, nil parents, SGLang's 7 / 8-element stores with a metadata map, EAGLE token
/// pairs, `extra_keys` (LoRA name, `[identifier, offset]` image pairs or bare identifiers,
/// cache salt). Unknown keys and trailing elements are ignored; unknown tags are skipped and
/// counted without losing the rest of the batch. Malformed input is an error, never a crash.
/// Decoding reads the payload in place (core/kv/msgpack_view): it keeps no scratch, and what it
/// allocates is the decoded batch itself, whose reservations are bounded by the bytes that back
/// them, never by a declared length.

#include <cstdint>
#include <expected>
#include <span>
#include <string>
#include <string_view>

#include "core/kv/kv_event.hpp"
#include "core/kv/msgpack_view.hpp"

namespace kvr {

/// Why a payload was rejected; `message` says what and where.
struct wire_error {
  std::string message;
};

/// Folds an engine's block hash to the u64 the router keys by: uint64 as-is, int64 as its bit
/// pattern, bin as its last 8 bytes big-endian (what vLLM's integer form sends).
[[nodiscard]] std::uint64_t fold_hash_bytes(std::span<const std::uint8_t> bytes);

/// The 64-bit image hash of an engine's multimodal identifier: a 64-hex-digit digest gives its
/// first 16 hex digits; anything else is hashed with XXH3-64 (seed 0).
[[nodiscard]] std::uint64_t image_hash_of_identifier(std::string_view identifier);

/// Decodes payloads. Stateless apart from its limits; one per thread is the habit.
class kv_wire_decoder {
 public:
  /// Payloads larger than this are rejected before parsing (counted as decode errors). A
  /// scheduler step's events are far smaller (32 k prefilled tokens are ~160 KB).
  static constexpr std::size_t max_payload_bytes = 4u << 20;
  /// Deepest nesting any real shape needs is 6 (envelope, events, event, extra_keys, block,
  /// image pair).
  static constexpr std::uint32_t max_depth = 12;
  /// The smallest encoding of an event the decoder keeps (`["BlockRemoved", []]`, 15 bytes).
  static constexpr std::size_t min_event_bytes = 15;

  /// One batch (array or map envelope). `out` is overwritten. A malformed envelope is an
  /// error; a malformed event inside a good envelope is skipped and counted in `out`. The
  /// shape vLLM and SGLang publish is read in one pass (core/kv/kv_wire_common_shape); every
  /// other payload by `decode_batch_any_shape`, with the same result where both read it.
  std::expected<void, wire_error> decode_batch(std::span<const std::uint8_t> payload, kv_batch& out);
  /// The general decoder: checks the whole payload (`mp_parse`), then walks it in place.
  std::expected<void, wire_error> decode_batch_any_shape(std::span<const std::uint8_t> payload, kv_batch& out);
  /// One event on its own (array or map form); an unknown tag is an error here.
  std::expected<kv_event, wire_error> decode_event(std::span<const std::uint8_t> payload);
};

}  // namespace kvr
