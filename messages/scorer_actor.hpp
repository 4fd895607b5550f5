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
    /// Steps of requests the scorer side routed (first token, end, the worker's failure) wait
    /// in its core, left behind a busy routing state: apply them (actors/pipeline/scorer_core).
    caf::reacts_to<steps_waiting_atom>,
    /// Bookings and lifecycle of requests ingress routed itself (round-robin, random).
    caf::reacts_to<lifecycle_batch_ptr>,
    /// The client of request `id` left: take it out of the queue, if it waits there.
    caf::reacts_to<withdraw_atom, std::uint64_t>,
    /// A scrape of a worker's engine metrics.
    caf::reacts_to<engine_scrape_ptr>,
    /// The queue's next timeout is due.
    caf::reacts_to<queue_check_atom>,
    /// The health checker's verdict on a worker: up (true) or down (false).
    caf::reacts_to<worker_health_atom, std::uint32_t, bool>,
    /// New cost-function weights from a reload (the index and bookings stay).
    caf::reacts_to<router_config_ptr>,
    /// Periodic housekeeping (expiry, the published snapshot).
    caf::reacts_to<tick_atom>,
    /// Other replicas' booking steps or snapshot parts wait in the set's peer inbox (replica
    /// sync): take them now (the hub sends this only when they should not wait for the next
    /// decision; actors/replica/peer_inbox).
    caf::reacts_to<peer_inbox_atom>,
    /// NATS is back: publish a snapshot of this replica's bookings now.
    caf::reacts_to<replica_resync_atom>,
    /// Drop the peers that fell silent, publish a status left stale (every 250 ms, with replicas).
    caf::reacts_to<peer_check_atom>,
    /// The index and its counters as JSON (operators and tests).
    caf::replies_to<dump_index_atom>::with<std::string>>;

/// Turns a job's token ids into block hashes, then hands it to the scorer. A job with image
/// URLs waits (parked) for the media fetcher's resolutions.
using hasher_actor = caf::typed_actor<caf::reacts_to<route_job_ptr>, caf::reacts_to<media_resolution_ptr>>;

}  // namespace kvr
