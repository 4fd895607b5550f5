#pragma once
/// How many blocks each worker's prefix cache holds, and so how many of a placement's new
/// blocks would evict cached ones.
///
/// Why: once caches are smaller than the working set, a prompt placed on a full cache evicts
/// as many of its least recently used blocks as the prompt adds, and those are hits a later
/// request loses. The kv cost charges for those evictions (`eviction_weight`), so the router
/// keeps prefixes together where caches are full and balances load as before where they are not.
///
/// A worker's capacity is the engine's `num_gpu_blocks` when its metrics tell it (per rank, so
/// times the worker's publishers); else, once its KV events have removed blocks (vLLM and SGLang
/// publish removals when they evict), the most blocks the index has seen it hold. Unknown
/// capacity means "never full": no eviction is charged.

#include <cstdint>
#include <optional>
#include <vector>

namespace kvr {

class cache_capacity {
 public:
  explicit cache_capacity(std::size_t workers = 0) : workers_(workers) {}

  void resize(std::size_t workers) { workers_.resize(workers); }
  /// The engine reports `blocks` per rank (`vllm:cache_config_info{num_gpu_blocks}`) and the
  /// worker publishes `ranks` event streams.
  void set_reported(std::size_t worker, std::uint64_t blocks, std::uint32_t ranks);
  /// After a KV batch: the worker now holds `resident` blocks in the index, and its events have
  /// removed `removed_events` so far (a count that only grows).
  void observe(std::size_t worker, std::uint64_t resident, std::uint64_t removed_events);

  /// Blocks the worker's cache holds in all; nullopt while unknown.
  [[nodiscard]] std::optional<std::uint64_t> capacity(std::size_t worker) const;
  /// Of `new_blocks` placed on a worker holding `resident`, how many evict a cached block.
  [[nodiscard]] std::uint64_t evicted_by(std::size_t worker, std::uint64_t resident, std::uint64_t new_blocks) const;

 private:
  struct worker_cache {
    std::uint64_t reported = 0;  ///< num_gpu_blocks x ranks; 0 = not reported
    std::uint64_t peak = 0;      ///< most blocks seen resident
    std::uint64_t removed = 0;   ///< removed events seen at the last observation
    bool evicts = false;         ///< its events have removed blocks: the cache has been full
  };
  std::vector<worker_cache> workers_;
};

}  // namespace kvr
