// Prefix index: applying KV events and matching prompts, at traffic-like sizes.
// Targets (one core): apply >= 5 M block events/s; find_matches for a 128-block prompt over
// 64 workers <= 2 us (median).
#include <map>
#include <memory>
#include <random>

#include <benchmark/benchmark.h>

#include "bench/micro/workload.hpp"
#include "core/routing/prefix_index.hpp"

namespace kvr::bench {
namespace {

constexpr std::size_t fill_event_blocks = 32;

/// Fills `index` with about `pairs` (worker, block) pairs: 32-block sequences of random tokens,
/// each stored by one worker.
void fill(prefix_index& index, std::size_t pairs, worker_id workers, std::uint64_t seed) {
  std::uint64_t salt = seed << 32;
  for (std::size_t stored = 0; stored < pairs; stored += fill_event_blocks) {
    const auto tokens = random_tokens(fill_event_blocks * index.block_size(), ++salt);
    index.apply_stored(static_cast<worker_id>(salt % workers), stored_event(tokens, index.block_size(), 0, fill_event_blocks, salt));
  }
}

/// Args: block size, blocks per event, index pairs, evicting (1 = the index sits at its bound).
/// Each iteration stores one event on one of 16 workers and removes the event stored 512
/// iterations earlier, so the index keeps its size. Items = blocks stored + blocks removed.
void BM_apply_stored_and_removed(benchmark::State& state) {
  const auto block_size = static_cast<std::uint32_t>(state.range(0));
  const auto blocks = static_cast<std::size_t>(state.range(1));
  const auto pairs = static_cast<std::size_t>(state.range(2));
  const bool evicting = state.range(3) != 0;
  constexpr worker_id workers = 16;
  constexpr std::size_t pool = 2048;
  constexpr std::size_t lag = 512;

  prefix_index index(block_size, evicting ? pairs : 4 * pairs);
  fill(index, pairs, workers, 1);
  std::vector<kv_stored> events;
  std::vector<kv_removed> removals;
  for (std::size_t i = 0; i < pool; ++i) {
    const auto tokens = random_tokens(blocks * block_size, 1000 + i);
    events.push_back(stored_event(tokens, block_size, 0, blocks, 5000000 + i));
    removals.push_back(kv_removed{events.back().block_hashes});
  }
  std::size_t i = 0;
  for (auto _ : state) {
    index.apply_stored(static_cast<worker_id>(i % workers), events[i % pool]);
    if (i >= lag) index.apply_removed(static_cast<worker_id>((i - lag) % workers), removals[(i - lag) % pool]);
    ++i;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * blocks * 2));
  state.counters["index_pairs"] = static_cast<double>(index.total_blocks());
  state.counters["bytes_per_pair"] = static_cast<double>(index.memory_bytes()) / static_cast<double>(index.total_blocks());
}
BENCHMARK(BM_apply_stored_and_removed)
    ->ArgsProduct({{16, 64}, {1, 8, 32}, {100000, 1000000}, {0}})
    ->ArgsProduct({{16}, {8}, {1000000}, {1}});

/// An index of `pairs` pairs over `workers` workers, plus 64 hot 128-block prompts, each cached
/// (to a random depth) by a quarter of the workers. Built once per shape.
struct match_fixture {
  std::unique_ptr<prefix_index> index;
  std::vector<std::vector<std::uint64_t>> prompts;
};

match_fixture& fixture(std::size_t pairs, worker_id workers) {
  static std::map<std::pair<std::size_t, worker_id>, match_fixture> cache;
  match_fixture& f = cache[{pairs, workers}];
  if (f.index) return f;
  constexpr std::uint32_t block_size = 16;
  constexpr std::size_t prompt_blocks = 128;
  f.index = std::make_unique<prefix_index>(block_size, 4 * pairs);
  std::mt19937_64 rng(9);
  for (std::size_t p = 0; p < 64; ++p) {
    const auto tokens = random_tokens(prompt_blocks * block_size, 77 + p);
    f.prompts.push_back(sequence_hashes_of(tokens, block_size));
    for (worker_id w = 0; w < workers; ++w) {
      if (rng() % 4 != 0) continue;
      const std::size_t depth = 1 + rng() % prompt_blocks;
      f.index->apply_stored(w, stored_event(tokens, block_size, 0, depth, (p << 20) + w));
    }
  }
  fill(*f.index, pairs - std::min(pairs, f.index->total_blocks()), workers, 2);
  return f;
}

/// Args: index pairs, workers. One call matches one 128-block prompt.
void BM_find_matches_128_blocks(benchmark::State& state) {
  match_fixture& f = fixture(static_cast<std::size_t>(state.range(0)), static_cast<worker_id>(state.range(1)));
  std::vector<std::uint32_t> overlaps;
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(f.index->find_matches(f.prompts[i++ % f.prompts.size()], overlaps));
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));  // prompts matched
  state.counters["index_pairs"] = static_cast<double>(f.index->total_blocks());
  state.counters["bytes_per_pair"] =
      static_cast<double>(f.index->memory_bytes()) / static_cast<double>(f.index->total_blocks());
}
BENCHMARK(BM_find_matches_128_blocks)->ArgsProduct({{100000, 1000000}, {4, 16, 64, 256}});

}  // namespace
}  // namespace kvr::bench
