// Choosing a worker. Target: <= 5 us over 256 workers.
#include <random>

#include <benchmark/benchmark.h>

#include "core/routing/selector/selector.hpp"

namespace kvr {
namespace {

std::vector<worker_candidate> candidates(std::size_t count) {
  std::mt19937_64 rng(3);
  std::vector<worker_candidate> out(count);
  for (std::size_t i = 0; i < count; ++i)
    out[i] = {static_cast<worker_id>(i), static_cast<std::uint32_t>(rng() % 64), rng() % 20000, rng() % 4000};
  return out;
}

/// Args: workers, mode, temperature x 10.
void BM_select_worker(benchmark::State& state) {
  const auto workers = candidates(static_cast<std::size_t>(state.range(0)));
  router_config config;
  config.mode = static_cast<router_mode>(state.range(1));
  config.router_temperature = static_cast<double>(state.range(2)) / 10.0;
  selector_rng rng(1);
  std::uint64_t ticket = 0;
  for (auto _ : state) benchmark::DoNotOptimize(select_worker(workers, config, {2048, ticket++}, rng));
  state.SetLabel(std::string(to_string(config.mode)) + (config.router_temperature > 0 ? " T>0" : ""));
}
BENCHMARK(BM_select_worker)
    ->ArgsProduct({{4, 16, 64, 256}, {static_cast<long>(router_mode::kv)}, {0, 5}})
    ->ArgsProduct({{256},
                   {static_cast<long>(router_mode::round_robin), static_cast<long>(router_mode::random),
                    static_cast<long>(router_mode::power_of_two), static_cast<long>(router_mode::least_loaded)},
                   {0}});

}  // namespace
}  // namespace kvr
