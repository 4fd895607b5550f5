#pragma once
/// What router replicas tell each other about one worker set (docs/replicas.md): the lifecycle
/// of the bookings each makes (batched as they happen) and, every second, the whole of its
/// in-flight bookings (a snapshot a receiver replaces that peer's part with). Plain values:
/// `peer_wire` encodes and decodes them, `remote_bookings` merges them, actors move the bytes.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace kvr {

/// One step of a booking made by the replica that sends it.
struct peer_event {
  enum class kind : std::uint8_t {
    booked,       ///< routed to `worker` (by name) with `prompt_tokens`, `overlap_blocks` cached
    first_token,  ///< its worker's first bytes arrived: the prefill is done
    finished,     ///< ended, however it ended: the booking goes
  };
  kind what = kind::booked;
  std::uint64_t request_id = 0;
  // Booked only:
  std::string worker;
  std::uint32_t prompt_tokens = 0;
  std::uint32_t overlap_blocks = 0;
  /// The prompt's full blocks, sent when the set shares blocks between in-flight requests or
  /// predicts its index from routings (approximate mode); else empty.
  std::vector<std::uint64_t> sequence_hashes;

  friend bool operator==(const peer_event&, const peer_event&) = default;
};

/// Who sent a message, and when (the receiver's sync lag is its clock minus `sent_unix_ns`).
struct peer_origin {
  std::string replica;           ///< --replica-id
  std::uint64_t incarnation = 0;  ///< differs per process start: a restarted replica starts afresh
  std::uint64_t sequence = 0;     ///< per set, every message, from 1: a gap means a lost message
  std::int64_t sent_unix_ns = 0;

  friend bool operator==(const peer_origin&, const peer_origin&) = default;
};

/// Booking events in the order they happened (at most 1 ms or 256 of them per message).
struct peer_bookings_message {
  peer_origin origin;
  std::vector<peer_event> events;

  friend bool operator==(const peer_bookings_message&, const peer_bookings_message&) = default;
};

/// One booking as a snapshot lists it.
struct peer_snapshot_entry {
  std::uint64_t request_id = 0;
  std::string worker;
  std::uint32_t prompt_tokens = 0;
  std::uint32_t overlap_blocks = 0;
  bool prefilled = false;  ///< its first token came

  friend bool operator==(const peer_snapshot_entry&, const peer_snapshot_entry&) = default;
};

/// Part `part` (from 0) of `parts` of a replica's in-flight bookings at one moment. A snapshot
/// too large for one message is split; a receiver applies it once every part has come.
struct peer_snapshot_message {
  peer_origin origin;
  std::uint32_t part = 0;
  std::uint32_t parts = 1;
  std::vector<peer_snapshot_entry> bookings;

  friend bool operator==(const peer_snapshot_message&, const peer_snapshot_message&) = default;
};

using peer_message = std::variant<peer_bookings_message, peer_snapshot_message>;

}  // namespace kvr
