// libFuzzer target: arbitrary bytes through the KV-event decoder and into a prefix index.
// Whatever the bytes, decoding returns a value or an error, and applying what decoded keeps
// the index within its bound; AddressSanitizer, UBSan and -malloc_limit_mb catch the rest.
// Differential: a batch whose local block hashes a decoder thread precomputed, its token ids
// then released, must leave a second index (and the event counters) exactly as the index that
// hashed the blocks itself, and the hybrid model's other groups exactly as theirs. And: wherever the common-shape
// reader accepts the bytes, the general decoder reads the same batch from them.

#include <bit>
#include <cstddef>
#include <cstdint>

#include "core/kv/kv_apply.hpp"
#include "core/kv/kv_wire.hpp"
#include "core/kv/kv_wire_common_shape.hpp"
#include "core/kv/stored_block_hashes.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static kvr::kv_wire_decoder decoder;
  static kvr::prefix_index index(4, 4096);
  static kvr::prefix_index precomputed_index(4, 4096);
  static kvr::kv_event_counters counters, precomputed_counters;
  static kvr::kv_groups groups(4, 4096), precomputed_groups(4, 4096);  // a hybrid model's other groups
  const std::span<const std::uint8_t> payload(data, size);

  kvr::kv_batch common, general;
  if (kvr::decode_common_batch(payload, common)) {
    if (!decoder.decode_batch_any_shape(payload, general)) __builtin_trap();
    // Timestamps by their bits: a NaN is what both read, and unequal to itself.
    if (std::bit_cast<std::uint64_t>(common.timestamp) != std::bit_cast<std::uint64_t>(general.timestamp)) __builtin_trap();
    common.timestamp = general.timestamp = 0;
    if (!(common == general)) __builtin_trap();
  }

  kvr::kv_batch batch;
  if (decoder.decode_batch(payload, batch)) {
    const kvr::worker_id worker = size > 0 ? data[0] % 8 : 0;
    kvr::apply_batch(index, worker, batch, counters, &groups);
    if (index.total_blocks() > index.max_blocks()) __builtin_trap();
    kvr::precompute_local_hashes(batch);
    kvr::release_hashed_token_ids(batch);  // as the router's decoder threads hand batches over
    kvr::apply_batch(precomputed_index, worker, batch, precomputed_counters, &precomputed_groups);
    if (precomputed_index.total_blocks() != index.total_blocks() ||
        precomputed_index.worker_blocks(worker) != index.worker_blocks(worker) ||
        precomputed_index.counters().stored_blocks != index.counters().stored_blocks ||
        precomputed_index.counters().malformed_stored != index.counters().malformed_stored ||
        precomputed_counters.partial_blocks != counters.partial_blocks ||
        precomputed_counters.dropped_stored != counters.dropped_stored ||
        precomputed_groups.counters().stored_blocks != groups.counters().stored_blocks ||
        precomputed_groups.counters().removed_blocks != groups.counters().removed_blocks)
      __builtin_trap();
    for (const kvr::kv_group_info& g : groups.groups())
      if (g.blocks > 4096) __builtin_trap();
  }
  (void)decoder.decode_event(payload);
  return 0;
}
