// The cache bounds trace-ceiling prints: an LRU prefix cache counted as engines count hits, and
// the unbounded / pooled / round-robin bounds of a Mooncake trace.
#include <gtest/gtest.h>

#include "core/loadgen/lru_block_cache.hpp"
#include "core/loadgen/workload.hpp"

namespace kvr::loadgen {
namespace {

TEST(lru_block_cache, hits_only_the_leading_cached_blocks_and_then_caches_the_whole_prompt) {
  lru_block_cache cache(0);
  const std::vector<std::uint64_t> first{1, 2, 3}, gap{1, 9, 3}, again{1, 9, 3, 4};
  EXPECT_EQ(cache.serve(first), 0u);
  EXPECT_EQ(cache.serve(gap), 1u) << "block 3 is cached but follows a miss";
  EXPECT_EQ(cache.serve(again), 3u);
  EXPECT_EQ(cache.size(), 5u);
}

TEST(lru_block_cache, evicts_the_least_recently_used_and_a_prompts_tail_before_its_head) {
  lru_block_cache cache(4);
  using keys = std::vector<std::uint64_t>;
  EXPECT_EQ(cache.serve(keys{1, 2}), 0u);
  EXPECT_EQ(cache.serve(keys{3, 4}), 0u);
  EXPECT_EQ(cache.serve(keys{5}), 0u);  // evicts 2, the oldest prompt's tail
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_EQ(cache.serve(keys{1}), 1u);  // its head is still there
  EXPECT_EQ(cache.serve(keys{6}), 0u);  // evicts 4, the tail of {3, 4}
  EXPECT_EQ(cache.serve(keys{3, 4}), 1u);
  EXPECT_EQ(cache.serve(keys{2}), 0u);
  EXPECT_EQ(cache.size(), 4u);
}

TEST(lru_block_cache, never_evicts_a_prompts_own_cached_blocks_to_make_room_for_its_new_ones) {
  lru_block_cache cache(3);
  using keys = std::vector<std::uint64_t>;
  EXPECT_EQ(cache.serve(keys{1}), 0u);
  EXPECT_EQ(cache.serve(keys{2, 3}), 0u);  // 1 is now the oldest
  EXPECT_EQ(cache.serve(keys{1, 4}), 1u);  // 4 takes the room of 3 (the oldest once 1 is in use)
  EXPECT_EQ(cache.evictions(), 1u) << "1 was not evicted and cached again";
  EXPECT_EQ(cache.serve(keys{1, 4}), 2u);
  EXPECT_EQ(cache.serve(keys{2}), 1u);
}

std::string row(double timestamp, std::uint64_t input, const std::string& ids) {
  return R"({"timestamp":)" + std::to_string(timestamp) + R"(,"input_length":)" + std::to_string(input) +
         R"(,"output_length":4,"hash_ids":[)" + ids + "]}\n";
}

TEST(trace_cache_bounds, count_hit_tokens_over_prompt_tokens_with_a_partial_last_hash_id) {
  // Two tokens per hash id, one per block: the second request (3 tokens) shares id 1 whole and
  // the first token of id 2; the third, listed first but later in time, repeats the first.
  const std::string trace = row(3, 4, "1,2") + row(1, 4, "1,2") + row(2, 3, "1,2");
  auto bounds = trace_cache_bounds(trace, {.engines = 2, .engine_blocks = 100, .block_size = 1, .block_tokens = 2});
  ASSERT_TRUE(bounds) << bounds.error();
  EXPECT_EQ(bounds->requests, 3u);
  EXPECT_EQ(bounds->prompt_tokens, 11u);
  EXPECT_EQ(bounds->distinct_blocks, 4u);
  EXPECT_DOUBLE_EQ(bounds->unbounded, 7.0 / 11);  // 0 + 3 + 4
  EXPECT_DOUBLE_EQ(bounds->pooled, 7.0 / 11);
  EXPECT_DOUBLE_EQ(bounds->round_robin, 4.0 / 11) << "the third request is on the first's engine";
}

/// 200 requests cycling over `prompts` prompts of one 64-token hash id (4 blocks) each.
std::string cycling(int prompts) {
  std::string trace;
  for (int i = 0; i < 200; ++i) trace += row(i, 64, std::to_string(i % prompts));
  return trace;
}

TEST(trace_cache_bounds, round_robin_copies_every_prompt_to_every_engine_where_the_pool_holds_each_once) {
  // 9 prompts x 4 blocks fit a pool of 4 x 20 blocks, not one engine of 20: round-robin puts
  // all 9 on each engine, and a cycle longer than an LRU cache always misses.
  auto fits = trace_cache_bounds(cycling(9), {.engines = 4, .engine_blocks = 20, .block_size = 16, .block_tokens = 64});
  ASSERT_TRUE(fits) << fits.error();
  EXPECT_DOUBLE_EQ(fits->unbounded, 191.0 / 200);
  EXPECT_DOUBLE_EQ(fits->pooled, 191.0 / 200);
  EXPECT_DOUBLE_EQ(fits->round_robin, 0.0);
  // 25 prompts (100 blocks) outgrow the pool too.
  auto outgrows = trace_cache_bounds(cycling(25), {.engines = 4, .engine_blocks = 20, .block_size = 16, .block_tokens = 64});
  ASSERT_TRUE(outgrows) << outgrows.error();
  EXPECT_DOUBLE_EQ(outgrows->unbounded, 175.0 / 200);
  EXPECT_DOUBLE_EQ(outgrows->pooled, 0.0);
  EXPECT_EQ(outgrows->distinct_blocks, 100u);
}

TEST(trace_cache_bounds, refuse_hash_ids_that_are_not_whole_blocks_and_rows_without_their_fields) {
  EXPECT_FALSE(trace_cache_bounds(row(0, 4, "1"), {.engines = 1, .engine_blocks = 8, .block_size = 16, .block_tokens = 20}));
  auto bad = trace_cache_bounds(R"({"timestamp":1,"hash_ids":[1]})", {});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("line 1"), std::string::npos);
}

}  // namespace
}  // namespace kvr::loadgen
