#include "core/metrics/engine_metrics.hpp"

#include <gtest/gtest.h>

namespace kvr {
namespace {

/// As vLLM's V1 engine serves them with two data-parallel ranks (trimmed to what is read).
constexpr std::string_view vllm_two_ranks = R"(# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-0.6B"} 5.0
vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-0.6B"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-0.6B"} 2.0
vllm:num_requests_waiting{engine="1",model_name="Qwen/Qwen3-0.6B"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-0.6B"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="Qwen/Qwen3-0.6B"} 0.25
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",num_gpu_blocks="27000",prefix_caching_hash_algo="sha256"} 1.0
vllm:prefix_cache_queries_total{engine="0",model_name="Qwen/Qwen3-0.6B"} 1.2e+06
)";

TEST(engine_metrics, sums_vllm_requests_over_ranks_and_averages_cache_usage) {
  const engine_metrics m = read_engine_metrics(vllm_two_ranks);
  EXPECT_EQ(m.running_requests, 8.0);
  EXPECT_EQ(m.waiting_requests, 2.0);
  EXPECT_EQ(m.kv_cache_usage, 0.375);
  EXPECT_EQ(m.block_size, 16u);
  EXPECT_EQ(m.num_gpu_blocks, 27000u);
  EXPECT_EQ(m.max_num_batched_tokens, std::nullopt);
  EXPECT_TRUE(m.usable());
  EXPECT_EQ(m.parse.malformed, 0u);
}

TEST(engine_metrics, reads_sglang_names) {
  const engine_metrics m = read_engine_metrics(
      "sglang:num_running_reqs{model_name=\"m\"} 4\n"
      "sglang:num_queue_reqs{model_name=\"m\"} 7\n"
      "sglang:token_usage{model_name=\"m\"} 0.28\n"
      "sglang:max_prefill_tokens{model_name=\"m\"} 16384.0\n");
  EXPECT_EQ(m.running_requests, 4.0);
  EXPECT_EQ(m.waiting_requests, 7.0);
  EXPECT_EQ(m.kv_cache_usage, 0.28);
  EXPECT_EQ(m.max_num_batched_tokens, 16384u);
}

TEST(engine_metrics, prefers_the_current_vllm_usage_name_and_falls_back_to_the_old_one) {
  EXPECT_EQ(read_engine_metrics("vllm:gpu_cache_usage_perc 0.75\n").kv_cache_usage, 0.75);
  EXPECT_EQ(read_engine_metrics("vllm:gpu_cache_usage_perc 0.75\nvllm:kv_cache_usage_perc 0.5\n").kv_cache_usage, 0.5);
}

TEST(engine_metrics, ignores_nan_negative_and_nonsense_values_and_bad_info_labels) {
  const engine_metrics m = read_engine_metrics(
      "vllm:num_requests_waiting{engine=\"0\"} NaN\n"
      "vllm:num_requests_waiting{engine=\"1\"} -3\n"
      "vllm:num_requests_running{engine=\"0\"} +Inf\n"
      "vllm:cache_config_info{block_size=\"sixteen\",num_gpu_blocks=\"0\"} 1\n"
      "sglang:max_prefill_tokens 1e300\n"
      "vllm:num_requests_waiting{engine=\"2\" 5\n");
  EXPECT_EQ(m.waiting_requests, std::nullopt);
  EXPECT_EQ(m.running_requests, std::nullopt);
  EXPECT_EQ(m.block_size, std::nullopt);
  EXPECT_EQ(m.num_gpu_blocks, std::nullopt);
  EXPECT_EQ(m.max_num_batched_tokens, std::nullopt);
  EXPECT_FALSE(m.usable());
  EXPECT_EQ(m.parse.malformed, 1u);
}

TEST(engine_metrics, an_answer_that_is_not_prometheus_text_is_unusable) {
  const engine_metrics m = read_engine_metrics("<html><body>404 Not Found</body></html>\n");
  EXPECT_FALSE(m.usable());
  EXPECT_EQ(m.parse.malformed, 1u);
}

}  // namespace
}  // namespace kvr
