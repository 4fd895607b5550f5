#pragma once
/// Peer messages <-> bytes: a msgpack array per message, compact and versioned.
///
///     bookings: [1, 0, replica, incarnation, sequence, sent_unix_ns, [event...]]
///       event:  [0, request_id, worker, prompt_tokens, overlap_blocks, [sequence_hash...]]  booked
///               [1, request_id]                                                            first token
///               [2, request_id]                                                            finished
///     snapshot: [1, 1, replica, incarnation, sequence, sent_unix_ns, part, parts, [entry...]]
///       entry:  [request_id, worker, prompt_tokens, overlap_blocks, prefilled]
///
/// The decoder reads untrusted bytes (anything on the NATS subjects): it checks the whole
/// payload once (bounded depth), then every field's type and range, and answers an error that
/// names what was wrong, never a crash. What it allocates is bounded by the payload's bytes.

#include <cstdint>
#include <expected>
#include <span>
#include <string>

#include "core/replica/peer_messages.hpp"

namespace kvr {

inline constexpr std::uint64_t peer_wire_version = 1;

struct peer_wire_limits {
  /// Larger payloads are refused before parsing (NATS's own default limit is 1 MB).
  static constexpr std::size_t max_payload_bytes = 8u << 20;
  static constexpr std::size_t max_replica_bytes = 256;
  static constexpr std::size_t max_worker_bytes = 2048;
  static constexpr std::uint32_t max_parts = 65536;
};

[[nodiscard]] std::string encode_peer_message(const peer_bookings_message& message);
[[nodiscard]] std::string encode_peer_message(const peer_snapshot_message& message);

/// One message; an error says what is wrong with it.
[[nodiscard]] std::expected<peer_message, std::string> decode_peer_message(std::span<const std::uint8_t> payload);

}  // namespace kvr
