#pragma once
/// msgpack bytes -> KV event batch, for every shape vLLM and SGLang publish
/// (docs/kv-events.md in shared/, summarized in docs/kv-events.md here):
/// array and map events (mixed in one batch), 2- / 3-element and map envelopes, uint64 / int64
/// / bin hashes, nil parents, SGLang's 7 / 8-element stores with a metadata map, EAGLE token
/// pairs, `extra_keys` (LoRA name, `[identifier, offset]` image pairs or bare identifiers,
/// cache salt). Unknown keys and trailing elements are ignored; unknown tags are skipped and
/// counted without losing the rest of the batch. Malformed input is an error, never a crash,
/// and memory is bounded by the payload size.

#include <cstdint>
#include <expected>
#include <span>
#include <string>
#include <string_view>

#include "core/kv/kv_event.hpp"
#include "core/kv/msgpack_tape.hpp"

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

/// Decodes payloads; reuses its buffers across calls (one decoder per thread).
class kv_wire_decoder {
 public:
  /// Payloads larger than this are rejected before parsing (counted as decode errors). A
  /// scheduler step's events are far smaller (32 k prefilled tokens are ~160 KB); the decoder
  /// needs up to 32 bytes per msgpack value, so this bounds its memory to 128 MiB at worst.
  static constexpr std::size_t max_payload_bytes = 4u << 20;
  /// Scratch nodes kept between payloads (2 MiB); a larger payload's scratch is given back.
  static constexpr std::size_t retained_nodes = 65536;
  /// Deepest nesting any real shape needs is 6 (envelope, events, event, extra_keys, block,
  /// image pair).
  static constexpr std::uint32_t max_depth = 12;

  /// One batch (array or map envelope). `out` is overwritten. A malformed envelope is an
  /// error; a malformed event inside a good envelope is skipped and counted in `out`.
  std::expected<void, wire_error> decode_batch(std::span<const std::uint8_t> payload, kv_batch& out);
  /// One event on its own (array or map form); an unknown tag is an error here.
  std::expected<kv_event, wire_error> decode_event(std::span<const std::uint8_t> payload);

  /// Scratch memory the decoder keeps between payloads.
  [[nodiscard]] std::size_t retained_bytes() const { return tape_.retained_bytes(); }

 private:
  /// Gives the tape's scratch beyond `retained_nodes` back when a decode ends.
  struct scratch_trim {
    mp_tape& tape;
    ~scratch_trim() { tape.release_beyond(retained_nodes); }
  };
  mp_tape tape_;
};

}  // namespace kvr
