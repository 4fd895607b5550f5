// Hashing a prompt into local and sequence block hashes. Target: >= 1 GB/s of token bytes.
#include <benchmark/benchmark.h>

#include "bench/micro/workload.hpp"

namespace kvr::bench {
namespace {

/// Args: block size, prompt tokens.
void BM_local_and_sequence_hashes(benchmark::State& state) {
  const auto block_size = static_cast<std::uint32_t>(state.range(0));
  const auto tokens = random_tokens(static_cast<std::size_t>(state.range(1)), 1);
  std::vector<std::uint64_t> local;
  std::vector<std::uint64_t> sequence;
  for (auto _ : state) {
    compute_local_hashes(tokens, block_size, {}, {}, local);
    compute_sequence_hashes(local, sequence);
    benchmark::DoNotOptimize(sequence.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * tokens.size() * sizeof(std::uint32_t)));
  state.counters["blocks"] = static_cast<double>(sequence.size());
}
BENCHMARK(BM_local_and_sequence_hashes)->ArgsProduct({{16, 64}, {1024, 8192, 32768}});

/// A prompt with one image every 1k tokens (256 placeholder tokens each): the streaming path.
void BM_local_hashes_with_images(benchmark::State& state) {
  const auto block_size = static_cast<std::uint32_t>(state.range(0));
  const auto tokens = random_tokens(8192, 2);
  std::vector<image_span> images;
  for (std::size_t offset = 100; offset + 256 < tokens.size(); offset += 1024) images.push_back({offset, 256, offset * 7919});
  std::vector<std::uint64_t> local;
  for (auto _ : state) {
    compute_local_hashes(tokens, block_size, images, {}, local);
    benchmark::DoNotOptimize(local.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * tokens.size() * sizeof(std::uint32_t)));
}
BENCHMARK(BM_local_hashes_with_images)->Arg(16)->Arg(64);

}  // namespace
}  // namespace kvr::bench
