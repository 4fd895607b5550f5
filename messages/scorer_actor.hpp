#pragma once
/// The typed handle of a worker set's scorer.

#include <cstdint>
#include <string>

#include "messages/type_ids.hpp"

namespace kvr {

using scorer_actor = caf::typed_actor<
    /// KV events from the set's subscriber, applied in order.
    caf::reacts_to<kv_updates>,
    /// A worker left the set: drop its index entries.
    caf::reacts_to<remove_worker_atom, std::uint32_t>,
    /// The index and its counters as JSON (operators and tests).
    caf::replies_to<dump_index_atom>::with<std::string>>;

}  // namespace kvr
