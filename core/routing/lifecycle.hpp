#pragma once
/// The steps of a routed request's life that a worker set's routing state hears about, and the
/// decision it makes for a request. Plain values: the scorer actor carries them between ingress
/// and `worker_set_router`; core never sees a message.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/common/time.hpp"

namespace kvr {

/// One step in the life of a routed request.
struct lifecycle_event {
  enum class kind : std::uint8_t {
    booked,         ///< routed to `worker` with `prompt_tokens` by ingress itself (round-robin, random)
    first_token,    ///< the worker's first bytes arrived: its prefill is done
    finished,       ///< ended, however it ended: release the booking
    worker_failed,  ///< `worker` failed before answering: release, keep the worker out a while
  };
  kind what = kind::booked;
  std::uint64_t request_id = 0;
  std::uint32_t worker = 0;
  std::uint32_t prompt_tokens = 0;
};

/// A disaggregated request books two legs: the decode leg under the request's id, the prefill
/// leg under this one (request ids stay below 2^63).
[[nodiscard]] constexpr std::uint64_t prefill_leg_id(std::uint64_t request_id) { return request_id | (std::uint64_t{1} << 63); }

/// What routing needs to know about one request to place it.
struct route_query {
  std::uint64_t request_id = 0;
  std::span<const std::uint64_t> sequence_hashes;  ///< the prompt's full blocks; empty = not hashed
  std::uint32_t prompt_tokens = 0;                 ///< exact once tokenized, else the request's estimate
  std::span<const std::uint32_t> excluded_workers;  ///< workers that already failed this request
  bool dry_run = false;                            ///< decide, but book nothing
  /// The conversation it belongs to (a hash of its session header or `user`); 0 = none.
  std::uint64_t session = 0;
  /// In a disaggregated set: choose a prefill worker and a decode worker. False there: the
  /// request runs aggregated on a decode-pool worker. Ignored by aggregated sets.
  bool disaggregate = false;
};

/// Why no worker was chosen.
enum class route_failure : std::uint8_t {
  none,                 ///< a worker was chosen
  no_healthy_worker,    ///< every worker is down or backing off
  every_worker_failed,  ///< the workers left all failed this request already
  set_retired,          ///< the worker set was reconfigured before the request was routed
  prompt_too_long,      ///< the prompt (images expanded) exceeds the router's limit; `prompt_tokens` says how long
  every_worker_busy,    ///< every routable worker is busy and the set queues: the request waits
  no_decode_worker,     ///< a prefill worker was found, but no decode worker is routable
  queue_full,           ///< it would have waited, but the set's queue is full
  queue_timeout,        ///< it waited in the queue for longer than the set's queue timeout
  input_refused,        ///< the hasher refused the prompt's input before rendering it; `refusal` says why
};

/// One candidate as routing saw it (reported in dry-run answers).
struct candidate_view {
  std::uint32_t worker = 0;
  std::uint32_t overlap_blocks = 0;
  std::uint64_t active_prefill_tokens = 0;
  std::uint64_t active_decode_blocks = 0;
  /// Of the two above, what other router replicas booked (0 without replicas).
  std::uint64_t remote_prefill_tokens = 0;
  std::uint64_t remote_decode_blocks = 0;
  /// Its prefix cache: blocks the index has it hold, its capacity (nullopt while unknown), and
  /// how many cached blocks this prompt's new blocks would evict there.
  std::uint64_t cached_blocks = 0;
  std::optional<std::uint64_t> cache_capacity_blocks;
  std::uint64_t evicted_blocks = 0;
  /// Requests its engine last reported waiting beyond the bookings (kv mode prices them).
  double engine_queued_requests = 0;
  /// What the mode compared for it (kv cost, booked load); nullopt where the mode compares
  /// nothing or the worker was not a candidate (unhealthy, excluded, busy).
  std::optional<double> cost;
  bool healthy = true;
  bool busy = false;
};

/// Where a request goes, and what routing knew when it chose.
struct route_decision {
  route_failure failure = route_failure::no_healthy_worker;
  std::uint32_t worker = 0;          ///< index into the set's workers (a disaggregated request's decode worker)
  std::uint32_t overlap_blocks = 0;  ///< cached blocks of the prompt on that worker
  /// A disaggregated request's prefill worker, and the prompt's blocks it caches. None: the
  /// request runs whole on `worker` (an aggregated set, or the conditional rule kept it local).
  std::optional<std::uint32_t> prefill_worker;
  std::uint32_t prefill_overlap_blocks = 0;
  /// A disaggregated set kept the request on its decode worker because the prompt's uncached
  /// part there is short (`max_local_prefill_tokens`).
  bool local_prefill = false;
  double cost = 0.0;
  std::uint32_t prompt_blocks = 0;
  std::uint32_t prompt_tokens = 0;   ///< exact when tokenized, else the request's estimate
  duration queued_for{};             ///< how long it waited in the set's queue
  std::vector<candidate_view> candidates;  ///< filled for dry runs only
  /// input_refused: the client-facing reason, and the request's field at fault.
  std::string refusal;
  std::string refused_field;

  [[nodiscard]] bool ok() const { return failure == route_failure::none; }
};

}  // namespace kvr
