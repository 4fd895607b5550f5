#pragma once
/// The simulated engine's scheduler and timing model: continuous batching as vLLM does it. Each
/// step admits waiting sequences while blocks and `max_num_seqs` allow (prefilling them), and
/// decodes one token for every running sequence. The step's duration grows with the uncached
/// prompt tokens it prefills and with the decode batch size; `speedup` divides all times.
///
/// Pure: the caller owns the clock. It calls `step()`, waits the returned duration, then hands
/// the outputs to clients and publishes the events (app/mocker does this on a thread).

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/kv/kv_event.hpp"
#include "core/mocker/paged_cache.hpp"

namespace kvr::mocker {

struct timing_model {
  double prefill_us_per_token = 50.0;  ///< per uncached prompt token (20k tokens/s: a mid-size model on one GPU)
  double step_base_us = 2000.0;        ///< fixed cost of a step that does any work
  double decode_us_per_sequence = 150.0;  ///< per sequence in the decode batch
  /// Per KV block a decode worker pulls from a prefill worker (disaggregated serving).
  double transfer_us_per_block = 20.0;
  double speedup = 1.0;                ///< all times divided by this

  [[nodiscard]] double step_us(std::uint64_t prefill_tokens, std::uint32_t decode_batch,
                               std::uint64_t transferred_blocks = 0) const;
};

struct engine_settings {
  std::uint32_t num_blocks = 16384;
  std::uint32_t block_size = 16;
  std::uint32_t max_num_seqs = 256;
  /// Prompt tokens a step prefills at most, as vLLM's --max-num-batched-tokens (0 = no bound).
  /// Coarse: a step admits sequences while its budget is not yet used up, so one long prompt
  /// still runs whole (vLLM would chunk it).
  std::uint32_t max_num_batched_tokens = 0;
  timing_model timing;
  hybrid_groups hybrid;  ///< a hybrid model's groups beside full attention (none by default)
  offload_tier offload;  ///< a host-memory tier below the GPU cache (none by default)
};

struct sequence_request {
  std::uint64_t id = 0;
  std::vector<std::uint32_t> tokens;
  std::uint32_t max_new_tokens = 16;
  std::vector<image_span> images;  ///< expanded image placeholder runs in `tokens`, with their hashes
  /// The prompt's KV was computed by a prefill worker: the blocks not cached here are pulled
  /// (transfer time per block), not prefilled.
  bool kv_pulled = false;
};

/// What one sequence got out of a step.
struct sequence_output {
  std::uint64_t id = 0;
  std::uint32_t new_tokens = 0;      ///< tokens generated this step (0 or 1)
  std::uint32_t generated = 0;       ///< so far
  std::uint32_t cached_tokens = 0;   ///< prompt tokens found in the cache (set on the first token)
  bool finished = false;
  std::string error;                 ///< set (and finished) if the request cannot run at all
};

struct step_result {
  double duration_us = 0;
  std::vector<sequence_output> outputs;
  std::vector<kv_event> events;
};

/// vLLM-style counters, for /metrics.
struct engine_counters {
  std::uint64_t prefix_queries_tokens = 0;  ///< prompt tokens looked up in the prefix cache
  std::uint64_t prefix_hits_tokens = 0;     ///< of which were cached
  std::uint64_t prompt_tokens = 0;
  std::uint64_t generation_tokens = 0;
  std::uint64_t finished_requests = 0;
  std::uint64_t aborted_requests = 0;
  std::uint64_t pulled_blocks = 0;  ///< blocks of remote-prefilled prompts transferred in
  std::uint64_t host_loaded_blocks = 0;  ///< prompt blocks loaded from the host tier instead of computed
};

class engine {
 public:
  explicit engine(engine_settings settings);

  /// Queues a request (it is admitted by a later step). A prompt that could never fit in the
  /// cache is answered with an error output at the next step.
  void submit(sequence_request request);
  /// A client went away: the sequence stops and frees its blocks.
  void abort(std::uint64_t id);
  /// One scheduler step.
  [[nodiscard]] step_result step();
  /// An engine restart: every request ends with an error and the cache empties.
  [[nodiscard]] std::vector<sequence_output> restart();

  [[nodiscard]] bool idle() const { return waiting_.empty() && running_.empty() && rejected_.empty(); }
  [[nodiscard]] std::size_t running() const { return running_.size(); }
  [[nodiscard]] std::size_t waiting() const { return waiting_.size(); }
  [[nodiscard]] const engine_counters& counters() const { return counters_; }
  [[nodiscard]] const paged_cache& cache() const { return cache_; }
  [[nodiscard]] const engine_settings& settings() const { return settings_; }

 private:
  struct running_sequence {
    sequence_request request;
    block_allocation blocks;
    std::uint32_t generated = 0;
    bool prefilled = false;
    std::uint32_t cached_tokens = 0;
  };
  engine_settings settings_;
  paged_cache cache_;
  std::deque<sequence_request> waiting_;
  std::vector<sequence_request> rejected_;
  std::unordered_map<std::uint64_t, running_sequence> running_;
  std::vector<std::uint64_t> admission_order_;  ///< running ids, oldest first (stable outputs)
  engine_counters counters_;
};

}  // namespace kvr::mocker
