#pragma once
/// The batches an engine publishes while decoding: each step's batch holds one BlockStored per
/// running request, storing the one block it just filled, with that request's previous block
/// as parent. Shared by the micro benchmark (kvr_bench_kv_wire) and the subscriber's load test.

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "core/kv/kv_event.hpp"

namespace kvr::bench {

/// `steps[p]` stores request r's block with engine hash hash_of(p, r) (16 random token ids per
/// block at block size 16) whose parent is hash_of(p - parent_stride, r), none in the first
/// `parent_stride` steps: a stride of 1 for steps that all go to one worker, of W for steps
/// dealt round-robin over W workers. `removals[p]` evicts step p's blocks.
struct decode_steps {
  std::vector<kv_batch> steps, removals;

  decode_steps(std::uint32_t block_size, std::size_t requests, std::size_t count, std::size_t parent_stride) {
    const auto hash_of = [&](std::size_t step, std::size_t request) { return 1'000'000'000 + step * requests + request + 1; };
    std::mt19937_64 rng(1000 + requests);
    for (std::size_t p = 0; p < count; ++p) {
      kv_batch& step = steps.emplace_back();
      kv_removed removal;
      for (std::size_t r = 0; r < requests; ++r) {
        kv_stored stored;
        stored.block_size = block_size;
        stored.block_hashes = {hash_of(p, r)};
        if (p >= parent_stride) stored.parent_block_hash = hash_of(p - parent_stride, r);
        for (std::uint32_t t = 0; t < block_size; ++t) stored.token_ids.push_back(static_cast<std::uint32_t>(rng() % 151000));
        removal.block_hashes.push_back(hash_of(p, r));
        step.events.emplace_back(std::move(stored));
      }
      removals.emplace_back().events.emplace_back(std::move(removal));
    }
  }
};

}  // namespace kvr::bench
