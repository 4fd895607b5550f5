#pragma once
/// Per-worker load from the requests the router has in flight: prefill tokens still to be
/// computed and KV blocks held while decoding. The scorer books a request when it routes it,
/// marks its first token (prefill done) and releases it when it ends, however it ends.
///
/// Blocks are counted as an engine holds them: requests that share a prompt prefix on one
/// worker share its blocks, so a block booked by several in-flight requests counts once (when
/// bookings carry their sequence hashes). `active_prefix_blocks` tells how much of a new
/// prompt a worker already holds for its running requests: the blocks it would not add.

#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/common/flat_u64_map.hpp"
#include "core/kv/kv_event.hpp"
#include "core/common/time.hpp"

namespace kvr {

/// One worker's booked load.
struct worker_load {
  std::uint64_t prefill_tokens = 0;  ///< prompt tokens not yet prefilled (cached blocks excluded)
  std::uint64_t decode_blocks = 0;   ///< KV blocks held by in-flight requests (shared ones once)
  std::uint32_t requests = 0;        ///< in-flight requests
  std::uint32_t awaiting_first_token = 0;  ///< of those, the ones whose first token has not come

  /// Adds another booker's load on the same worker (another replica's).
  worker_load& operator+=(const worker_load& other) {
    prefill_tokens += other.prefill_tokens;
    decode_blocks += other.decode_blocks;
    requests += other.requests;
    awaiting_first_token += other.awaiting_first_token;
    return *this;
  }
  friend bool operator==(const worker_load&, const worker_load&) = default;
};

/// What routing decided for one request.
struct booking {
  std::uint64_t request_id = 0;
  worker_id worker = 0;
  std::uint32_t prompt_tokens = 0;
  std::uint32_t overlap_blocks = 0;  ///< blocks the worker already caches (not prefilled again)
};

struct active_sequences_counters {
  std::uint64_t booked = 0;
  std::uint64_t released = 0;
  std::uint64_t expired = 0;           ///< bookings released by age, not by a finish message
  std::uint64_t duplicate_bookings = 0;
  std::uint64_t unknown_releases = 0;  ///< release / first-token of an id not booked (harmless)
};

class active_sequences {
 public:
  /// `max_age`: a booking older than this is presumed lost (its finish message never came) and
  /// released by `expire`.
  active_sequences(std::uint32_t block_size, bool track_active_blocks, duration max_age);

  /// Books `request` on its worker. Returns false (and changes nothing) if the id is in flight.
  /// `sequence_hashes`: the prompt's full blocks, so that blocks shared with other in-flight
  /// requests on the worker count once (empty: every block counts).
  bool book(const booking& request, time_point now, std::span<const std::uint64_t> sequence_hashes = {});
  /// How many leading blocks of a prompt (its sequence hashes) the worker holds for its
  /// in-flight requests. Chained hashes make held blocks a prefix-closed set, so this is a
  /// binary search.
  [[nodiscard]] std::uint32_t active_prefix_blocks(worker_id worker, std::span<const std::uint64_t> sequence_hashes) const;
  /// The worker sent its first byte: the request's prefill tokens are done. False (and
  /// counted) for an id not in flight.
  bool first_token(std::uint64_t request_id);
  /// The request ended (success, error or disconnect). Unknown or repeated ids are harmless
  /// (counted; false).
  bool release(std::uint64_t request_id);
  /// Releases bookings older than `max_age`; returns how many.
  std::size_t expire(time_point now);

  /// Load of every worker id seen so far (indexed by worker id).
  [[nodiscard]] std::span<const worker_load> loads() const { return loads_; }
  [[nodiscard]] worker_load load(worker_id worker) const;
  [[nodiscard]] std::size_t in_flight() const { return bookings_.size(); }
  [[nodiscard]] const active_sequences_counters& counters() const { return counters_; }
  /// A booking in flight as it was made, and whether its prefill is done.
  struct in_flight_booking {
    booking request;
    bool prefilled = false;
  };
  /// Calls `fn(const in_flight_booking&)` for every booking in flight (in no particular order).
  template <class Fn>
  void for_each_booking(Fn&& fn) const {
    bookings_.for_each([&](std::uint64_t id, const active& entry) {
      fn(in_flight_booking{{id, entry.worker, entry.prompt_tokens, entry.overlap_blocks}, entry.first_token_came});
    });
  }
  /// The block hashes a booking holds (empty when it holds none by hash).
  [[nodiscard]] std::span<const std::uint64_t> held_hashes(std::uint64_t request_id) const {
    const auto it = hashes_of_.find(request_id);
    return it == hashes_of_.end() ? std::span<const std::uint64_t>() : std::span<const std::uint64_t>(it->second);
  }

 private:
  struct active {
    worker_id worker = 0;
    std::uint32_t prefill_tokens = 0;  ///< still pending; 0 once the first token came
    bool first_token_came = false;
    std::uint32_t private_blocks = 0;  ///< blocks not shared by hash (partial block, or no hashes)
    std::uint32_t prompt_tokens = 0;   ///< as booked (replica snapshots list bookings as made)
    std::uint32_t overlap_blocks = 0;
    std::int64_t booked_at_ns = 0;
  };

  void compact_age_queue();
  void hold(worker_id worker, std::span<const std::uint64_t> hashes);
  void drop(worker_id worker, std::span<const std::uint64_t> hashes);

  std::uint32_t block_size_;
  bool track_active_blocks_;
  std::int64_t max_age_ns_;
  flat_u64_map<active> bookings_;
  std::deque<std::pair<std::int64_t, std::uint64_t>> by_age_;  ///< (booked_at, id), booking order
  std::vector<worker_load> loads_;
  std::vector<flat_u64_map<std::uint32_t>> held_;  ///< per worker: block hash -> in-flight requests holding it
  std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> hashes_of_;  ///< request -> its block hashes
  active_sequences_counters counters_;
};

}  // namespace kvr
