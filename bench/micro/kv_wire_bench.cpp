// KV events end to end inside the router process: msgpack payload -> decoded batch -> prefix
// index. Target (#20): >= 6 M block events/s on one core at 16 tokens per block.
#include <benchmark/benchmark.h>

#include "bench/micro/decode_steps.hpp"
#include "bench/micro/kv_encode.hpp"
#include "bench/micro/workload.hpp"
#include "core/kv/kv_apply.hpp"
#include "core/kv/kv_wire.hpp"
#include "core/kv/stored_block_hashes.hpp"

namespace kvr::bench {
namespace {

/// An index of about 10^5 (worker, block) pairs over `workers` workers, 32-block sequences.
prefix_index index_of_100k_pairs(std::uint32_t block_size, worker_id workers) {
  prefix_index index(block_size, 1u << 22);
  for (std::size_t i = 0; index.total_blocks() < 100000; ++i) {
    const auto tokens = random_tokens(32 * block_size, 900000 + i);
    index.apply_stored(static_cast<worker_id>(i % workers), stored_event(tokens, block_size, 0, 32, 7000000 + i));
  }
  return index;
}

/// Args: block size, blocks per event. Each iteration decodes and applies one stored event on
/// one of 16 workers and one removal of the event stored 512 iterations earlier, over an index
/// of about 10^5 pairs. Items = block events (stored + removed blocks).
void BM_decode_and_apply(benchmark::State& state) {
  const auto block_size = static_cast<std::uint32_t>(state.range(0));
  const auto blocks = static_cast<std::size_t>(state.range(1));
  constexpr std::size_t pool = 2048, lag = 512;
  constexpr worker_id workers = 16;

  prefix_index index = index_of_100k_pairs(block_size, workers);
  std::vector<std::vector<std::uint8_t>> stores, removals;
  std::size_t payload_bytes = 0;
  for (std::size_t i = 0; i < pool; ++i) {
    kv_stored stored = stored_event(random_tokens(blocks * block_size, 1000 + i), block_size, 0, blocks, 5000000 + i);
    removals.push_back(encode_batch({kv_removed{stored.block_hashes}}));
    stores.push_back(encode_batch({stored}));
    payload_bytes += stores.back().size();
  }
  kv_wire_decoder decoder;
  kv_batch batch;
  kv_event_counters counters;
  std::size_t i = 0;
  for (auto _ : state) {
    (void)decoder.decode_batch(stores[i % pool], batch);
    apply_batch(index, static_cast<worker_id>(i % workers), batch, counters);
    if (i >= lag) {
      (void)decoder.decode_batch(removals[(i - lag) % pool], batch);
      apply_batch(index, static_cast<worker_id>((i - lag) % workers), batch, counters);
    }
    ++i;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * blocks * 2));
  state.counters["stored_payload_bytes"] = static_cast<double>(payload_bytes) / pool;
  if (counters.dropped_stored != 0 || counters.malformed_events != 0) state.SkipWithError("events were dropped");
}
BENCHMARK(BM_decode_and_apply)->ArgsProduct({{16, 64}, {1, 8, 32}});

/// Decode steps (bench/micro/decode_steps.hpp) dealt over 16 workers: `pool` steps, each
/// removed `lag` iterations after it was stored.
struct decode_step_load {
  static constexpr std::size_t pool = 2048, lag = 512;
  static constexpr worker_id workers = 16;
};

/// Decode steps decoded and applied (the index hashes the blocks). Args: block size, requests
/// per step. Each iteration one step's batch on one of 16 workers and the removal of a step's
/// blocks stored 512 iterations earlier, over an index of about 10^5 pairs. Items = block
/// events (stored + removed blocks).
void BM_decode_and_apply_decode_steps(benchmark::State& state) {
  const auto block_size = static_cast<std::uint32_t>(state.range(0));
  const auto requests = static_cast<std::size_t>(state.range(1));
  prefix_index index = index_of_100k_pairs(block_size, decode_step_load::workers);
  std::vector<std::vector<std::uint8_t>> steps, removals;
  {
    const decode_steps shape(block_size, requests, decode_step_load::pool, decode_step_load::workers);
    for (const kv_batch& step : shape.steps) steps.push_back(encode_batch(step.events));
    for (const kv_batch& removal : shape.removals) removals.push_back(encode_batch(removal.events));
  }
  kv_wire_decoder decoder;
  kv_batch batch;
  kv_event_counters counters;
  std::size_t i = 0;
  for (auto _ : state) {
    (void)decoder.decode_batch(steps[i % decode_step_load::pool], batch);
    apply_batch(index, static_cast<worker_id>(i % decode_step_load::workers), batch, counters);
    if (i >= decode_step_load::lag) {
      (void)decoder.decode_batch(removals[(i - decode_step_load::lag) % decode_step_load::pool], batch);
      apply_batch(index, static_cast<worker_id>((i - decode_step_load::lag) % decode_step_load::workers), batch, counters);
    }
    ++i;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * requests * 2));
  if (counters.dropped_stored != 0 || counters.malformed_events != 0) state.SkipWithError("events were dropped");
}
BENCHMARK(BM_decode_and_apply_decode_steps)->ArgsProduct({{16}, {8, 64}});

/// Decode steps applied by the scorer once a decoder thread hashed the blocks. Same workload
/// as BM_decode_and_apply_decode_steps.
void BM_apply_prehashed_decode_steps(benchmark::State& state) {
  const auto block_size = static_cast<std::uint32_t>(state.range(0));
  const auto requests = static_cast<std::size_t>(state.range(1));
  prefix_index index = index_of_100k_pairs(block_size, decode_step_load::workers);
  decode_steps shape(block_size, requests, decode_step_load::pool, decode_step_load::workers);
  for (kv_batch& step : shape.steps) precompute_local_hashes(step);
  kv_event_counters counters;
  std::size_t i = 0;
  for (auto _ : state) {
    apply_batch(index, static_cast<worker_id>(i % decode_step_load::workers), shape.steps[i % decode_step_load::pool], counters);
    if (i >= decode_step_load::lag)
      apply_batch(index, static_cast<worker_id>((i - decode_step_load::lag) % decode_step_load::workers),
                  shape.removals[(i - decode_step_load::lag) % decode_step_load::pool], counters);
    ++i;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * requests * 2));
  if (counters.dropped_stored != 0 || counters.malformed_events != 0) state.SkipWithError("events were dropped");
}
BENCHMARK(BM_apply_prehashed_decode_steps)->ArgsProduct({{16}, {8, 64}});

/// Decoding alone, for comparison. Args: block size, blocks per event.
void BM_decode_only(benchmark::State& state) {
  const auto block_size = static_cast<std::uint32_t>(state.range(0));
  const auto blocks = static_cast<std::size_t>(state.range(1));
  const auto payload = encode_batch({stored_event(random_tokens(blocks * block_size, 1), block_size, 0, blocks, 1)});
  kv_wire_decoder decoder;
  kv_batch batch;
  for (auto _ : state) {
    benchmark::DoNotOptimize(decoder.decode_batch(payload, batch));
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * blocks));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * payload.size()));
}
BENCHMARK(BM_decode_only)->ArgsProduct({{16, 64}, {1, 8, 32}});

/// Decoding alone over 4096 payloads of different token ids, as a subscriber sees them: on one
/// payload decoded again and again (BM_decode_only), and even over 256 of 8 blocks, the branch
/// predictor learns the ids' widths. Args: block size, blocks per event.
void BM_decode_varied(benchmark::State& state) {
  const auto block_size = static_cast<std::uint32_t>(state.range(0));
  const auto blocks = static_cast<std::size_t>(state.range(1));
  constexpr std::size_t pool = 4096;
  std::vector<std::vector<std::uint8_t>> payloads;
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < pool; ++i) {
    payloads.push_back(encode_batch({stored_event(random_tokens(blocks * block_size, 1000 + i), block_size, 0, blocks, 1 + i)}));
    bytes += payloads.back().size();
  }
  kv_wire_decoder decoder;
  kv_batch batch;
  std::size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(decoder.decode_batch(payloads[i++ % pool], batch));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * blocks));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes / pool));
}
BENCHMARK(BM_decode_varied)->ArgsProduct({{16, 64}, {1, 8, 32}});

/// What one KV decoder thread does per payload: decode it and hash its stored blocks. Run on
/// 1 and 2 threads (each its own decoder and payloads, as the router's threads have): items/s
/// is the sum over threads. Args: block size, blocks per event.
void BM_decoder_thread(benchmark::State& state) {
  const auto block_size = static_cast<std::uint32_t>(state.range(0));
  const auto blocks = static_cast<std::size_t>(state.range(1));
  constexpr std::size_t pool = 256;
  std::vector<std::vector<std::uint8_t>> stores, removals;
  for (std::size_t i = 0; i < pool; ++i) {
    kv_stored stored = stored_event(random_tokens(blocks * block_size, 1000 + i + 7919 * state.thread_index()), block_size,
                                    0, blocks, 5000000 + i);
    removals.push_back(encode_batch({kv_removed{stored.block_hashes}}));
    stores.push_back(encode_batch({stored}));
  }
  kv_wire_decoder decoder;
  kv_batch batch;
  std::size_t i = 0;
  for (auto _ : state) {
    (void)decoder.decode_batch(stores[i % pool], batch);
    precompute_local_hashes(batch);
    benchmark::DoNotOptimize(batch);
    (void)decoder.decode_batch(removals[i % pool], batch);
    benchmark::DoNotOptimize(batch);
    ++i;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * blocks * 2));
}
BENCHMARK(BM_decoder_thread)->ArgsProduct({{16, 64}, {8, 32}})->Threads(1)->Threads(2)->UseRealTime();

/// What the set's scorer does per payload once a decoder thread hashed the blocks: apply the
/// decoded batches (chain, link, remove). Same workload as BM_decode_and_apply.
void BM_apply_prehashed(benchmark::State& state) {
  const auto block_size = static_cast<std::uint32_t>(state.range(0));
  const auto blocks = static_cast<std::size_t>(state.range(1));
  constexpr std::size_t pool = 2048, lag = 512;
  constexpr worker_id workers = 16;
  prefix_index index = index_of_100k_pairs(block_size, workers);
  kv_wire_decoder decoder;
  std::vector<kv_batch> stores(pool), removals(pool);
  for (std::size_t i = 0; i < pool; ++i) {
    kv_stored stored = stored_event(random_tokens(blocks * block_size, 1000 + i), block_size, 0, blocks, 5000000 + i);
    (void)decoder.decode_batch(encode_batch({kv_removed{stored.block_hashes}}), removals[i]);
    (void)decoder.decode_batch(encode_batch({stored}), stores[i]);
    precompute_local_hashes(stores[i]);
  }
  kv_event_counters counters;
  std::size_t i = 0;
  for (auto _ : state) {
    apply_batch(index, static_cast<worker_id>(i % workers), stores[i % pool], counters);
    if (i >= lag) apply_batch(index, static_cast<worker_id>((i - lag) % workers), removals[(i - lag) % pool], counters);
    ++i;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * blocks * 2));
  if (counters.dropped_stored != 0 || counters.malformed_events != 0) state.SkipWithError("events were dropped");
}
BENCHMARK(BM_apply_prehashed)->ArgsProduct({{16, 64}, {8, 32}});

}  // namespace
}  // namespace kvr::bench
