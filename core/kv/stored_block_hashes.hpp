#pragma once
/// The router's local hash of each block of a `BlockStored` event: its tokens, the images on
/// it, the LoRA name and, on a sequence's first block, the cache salt (core/kv/block_hash).
/// They depend on the event alone (chaining them needs the parent's sequence hash, which only
/// the index knows), so the KV subscriber's decoder threads compute them beside decoding and the
/// scorer, which applies every publisher's events on one thread, only chains and links them.

#include <cstdint>
#include <vector>

#include "core/kv/kv_event.hpp"

namespace kvr {

/// The local hash of every block of `event`, written into `out` (cleared first). Empty when the
/// tokens do not fill the blocks (such an event is not indexed).
void compute_stored_local_hashes(const kv_stored& event, std::vector<std::uint64_t>& out);

/// Fills `local_hashes` of every GPU-tier stored event of `batch` whose tokens fill its blocks,
/// but a mamba group's.
void precompute_local_hashes(kv_batch& batch);

/// Frees the token ids of every stored event of `batch` whose blocks are hashed (the index
/// reads only the hashes). A decoder thread does this before handing the batch to the scorer:
/// the ids are most of a batch's memory, and freed by the thread that allocated them they cost
/// glibc's allocator far less than freed by the scorer's.
void release_hashed_token_ids(kv_batch& batch);

}  // namespace kvr
