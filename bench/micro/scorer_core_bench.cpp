// A worker set's decisions per second through its scorer core: what the threads that hold the
// hashes (I/O threads, hashers) can decide for one set, one thread alone or several at once.
// Each iteration decides a 256-block prompt (kv mode, approximate: the index is read and the
// prediction written) and reports its end, as ingress does for a request. A decision that finds
// the core taken is declined (ingress would send it to the scorer actor) and counted apart.
#include <atomic>
#include <random>

#include <benchmark/benchmark.h>

#include "actors/pipeline/runtime.hpp"
#include "actors/pipeline/scorer.hpp"

namespace kvr {
namespace {

constexpr std::size_t prompts = 64;
constexpr std::size_t prompt_blocks = 256;

/// One scorer of 16 workers for the whole run (its actor idle but for its ticks).
struct one_set {
  caf::actor_system_config config;
  std::optional<caf::actor_system> system;
  scorer_handle scorer;
  /// Prompts in eight groups of eight; a group shares its first half (a system prompt).
  std::vector<std::vector<std::uint64_t>> hashes;

  one_set() {
    configure_actor_system(config, 1);
    system.emplace(config);
    scorer_settings settings;
    settings.routing.config.use_kv_events = false;
    for (int w = 0; w < 16; ++w) settings.routing.worker_names.push_back(std::to_string(w));
    scorer = spawn_scorer(*system, settings);
    std::mt19937_64 rng(7);
    for (std::size_t p = 0; p < prompts; ++p) {
      std::vector<std::uint64_t> prompt(prompt_blocks);
      std::mt19937_64 group(p / 8);
      for (std::size_t b = 0; b < prompt_blocks; ++b) prompt[b] = b < prompt_blocks / 2 ? group() : rng();
      hashes.push_back(std::move(prompt));
    }
  }
  ~one_set() {  // the system's destructor waits for every actor
    caf::anon_send_exit(scorer.actor, caf::exit_reason::user_shutdown);
    system->await_all_actors_done();
  }
};

/// The set of this run, made by main (a function-local static would be destroyed after CAF's
/// own statics, at exit).
one_set* running_set = nullptr;

void BM_decide_and_release(benchmark::State& state) {
  one_set& set = *running_set;
  scorer_core& core = *set.scorer.core;
  std::uint64_t request_id = (static_cast<std::uint64_t>(state.thread_index()) + 1) << 40;
  std::size_t prompt = static_cast<std::size_t>(state.thread_index()) * 13;
  std::uint64_t decided = 0, declined = 0;
  for (auto _ : state) {
    const route_query query{.request_id = ++request_id,
                            .sequence_hashes = set.hashes[prompt++ % prompts],
                            .prompt_tokens = prompt_blocks * 16};
    if (auto decision = core.try_decide(query)) {
      core.report({lifecycle_event::kind::finished, request_id, decision->worker, 0}, set.scorer.actor);
      ++decided;
    } else {
      ++declined;
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(decided));  // items/s: decisions taken here
  state.counters["decided"] = benchmark::Counter(static_cast<double>(decided), benchmark::Counter::kIsRate);
  state.counters["declined"] = benchmark::Counter(static_cast<double>(declined), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_decide_and_release)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace kvr

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  kvr::one_set set;
  kvr::running_set = &set;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
