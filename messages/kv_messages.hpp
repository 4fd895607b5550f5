#pragma once
/// What the KV subscriber hands to a worker set's scorer: decoded batches, already put in
/// order by the sequence tracker, with the instruction to clear a publisher's entries first
/// where the tracker said so. A publisher is one KV-event stream (a data-parallel worker has one
/// per rank), identified by its index in the set's publisher list. Many batches travel in one
/// message (no message per event).

#include <memory>
#include <vector>

#include "core/kv/kv_event.hpp"

namespace kvr {

struct kv_update {
  worker_id publisher = 0;  ///< the set's publisher index (the prefix index's id)
  bool clear_first = false;  ///< restart, missing history or unrecoverable gap
  kv_batch batch;
};

using kv_update_list = std::vector<kv_update>;
/// Shared, immutable once sent: the subscriber builds it, the scorer reads it.
using kv_updates = std::shared_ptr<const kv_update_list>;

}  // namespace kvr
