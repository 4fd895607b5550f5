#pragma once
/// What an engine's `/metrics` says about its load and its cache, read from vLLM's and SGLang's
/// own metric names. A data-parallel engine reports one series per rank (an `engine` or
/// `dp_rank` label): waiting and running requests are summed over them, cache usage averaged.

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/metrics/prometheus_text.hpp"

namespace kvr {

struct engine_metrics {
  std::optional<double> waiting_requests;   ///< vllm:num_requests_waiting, sglang:num_queue_reqs
  std::optional<double> running_requests;   ///< vllm:num_requests_running, sglang:num_running_reqs
  std::optional<double> kv_cache_usage;     ///< 0..1: vllm:kv_cache_usage_perc (or gpu_cache_usage_perc), sglang:token_usage
  std::optional<std::uint32_t> block_size;  ///< vllm:cache_config_info{block_size}
  std::optional<std::uint64_t> num_gpu_blocks;  ///< vllm:cache_config_info{num_gpu_blocks}
  /// The engine's prefill batch size: sglang:max_prefill_tokens (vLLM does not export it).
  std::optional<std::uint32_t> max_num_batched_tokens;
  /// process_start_time_seconds (Python's Prometheus client exports it): a larger value than
  /// before means the engine restarted, its cache empty.
  std::optional<double> start_time;
  prometheus_parse_result parse;  ///< samples read and malformed lines skipped

  /// Something this router uses was found (else the scrape is counted as unusable).
  [[nodiscard]] bool usable() const { return waiting_requests || running_requests || kv_cache_usage; }
};

[[nodiscard]] engine_metrics read_engine_metrics(std::string_view text);

/// Whether an engine whose start time was `before` has restarted, now that it reports `now`.
[[nodiscard]] inline bool engine_restarted(std::optional<double> before, std::optional<double> now) {
  return before && now && *now > *before;
}

}  // namespace kvr
