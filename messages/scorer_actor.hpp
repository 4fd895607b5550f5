#pragma once
/// Typed handles of a worker set's actors.

#include <cstdint>
#include <string>

#include "messages/type_ids.hpp"

namespace kvr {

using scorer_actor = caf::typed_actor<
    /// KV events from the set's subscriber, applied in order.
    caf::reacts_to<kv_updates>,
    /// Route a request (answer through the job's sink) and book it on the chosen worker.
    caf::reacts_to<route_job_ptr>,
    /// The worker sent its first byte for this request: its prefill is done.
    caf::reacts_to<first_token_atom, std::uint64_t>,
    /// The request ended (success, worker error or client disconnect): release its booking.
    caf::reacts_to<finished_atom, std::uint64_t>,
    /// The worker failed before answering: release, and keep the worker out for a while.
    caf::reacts_to<worker_failed_atom, std::uint64_t, std::uint32_t>,
    /// Bookings and lifecycle of requests ingress routed itself (round-robin, random).
    caf::reacts_to<lifecycle_batch_ptr>,
    /// The health checker's verdict on a worker: up (true) or down (false).
    caf::reacts_to<worker_health_atom, std::uint32_t, bool>,
    /// Periodic housekeeping (expiry, the published snapshot).
    caf::reacts_to<tick_atom>,
    /// A worker left the set: drop its index entries.
    caf::reacts_to<remove_worker_atom, std::uint32_t>,
    /// The index and its counters as JSON (operators and tests).
    caf::replies_to<dump_index_atom>::with<std::string>>;

/// Turns a job's token ids into block hashes, then hands it to the scorer. A job with image
/// URLs waits (parked) for the media fetcher's resolutions.
using hasher_actor = caf::typed_actor<caf::reacts_to<route_job_ptr>, caf::reacts_to<media_resolution_ptr>>;

}  // namespace kvr
