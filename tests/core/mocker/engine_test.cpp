#include "core/mocker/engine.hpp"

#include <numeric>

#include <gtest/gtest.h>

namespace kvr::mocker {
namespace {

sequence_request request(std::uint64_t id, std::uint32_t first_token, std::size_t length, std::uint32_t max_new) {
  sequence_request r{id, std::vector<std::uint32_t>(length), max_new};
  std::iota(r.tokens.begin(), r.tokens.end(), first_token);
  return r;
}

engine_settings small(std::uint32_t blocks = 256, std::uint32_t max_seqs = 8) {
  engine_settings s;
  s.num_blocks = blocks;
  s.block_size = 16;
  s.max_num_seqs = max_seqs;
  return s;
}

TEST(mocker_engine, a_cached_prompt_prefills_faster_and_counts_as_prefix_hits) {
  engine e(small());
  e.submit(request(1, 0, 320, 1));
  const step_result cold = e.step();
  ASSERT_EQ(cold.outputs.size(), 1u);
  EXPECT_TRUE(cold.outputs[0].finished);
  EXPECT_EQ(cold.outputs[0].cached_tokens, 0u);
  e.submit(request(2, 0, 320, 1));
  const step_result warm = e.step();
  EXPECT_EQ(warm.outputs[0].cached_tokens, 320u);
  EXPECT_LT(warm.duration_us, cold.duration_us / 2);
  EXPECT_EQ(e.counters().prefix_queries_tokens, 640u);
  EXPECT_EQ(e.counters().prefix_hits_tokens, 320u);
}

TEST(mocker_engine, decode_emits_one_token_per_step_and_steps_slow_down_with_the_batch) {
  engine e(small());
  e.submit(request(1, 0, 32, 3));
  EXPECT_EQ(e.step().outputs[0].generated, 1u);  // prefill gives the first token
  const step_result one = e.step();
  EXPECT_EQ(one.outputs[0].generated, 2u);
  e.submit(request(2, 1000, 32, 5));
  e.submit(request(3, 2000, 32, 5));
  (void)e.step();  // 1 finishes; 2 and 3 are prefilled
  const step_result three_wide = e.step();
  EXPECT_EQ(three_wide.outputs.size(), 2u);
  EXPECT_GT(three_wide.duration_us, one.duration_us);
}

TEST(mocker_engine, requests_wait_for_a_batch_slot_and_for_blocks) {
  engine e(small(/*blocks=*/8, /*max_seqs=*/1));
  e.submit(request(1, 0, 64, 8));  // 5 blocks
  e.submit(request(2, 500, 64, 8));
  (void)e.step();
  EXPECT_EQ(e.running(), 1u);
  EXPECT_EQ(e.waiting(), 1u);
  e.abort(1);  // the client went away: its blocks free at once
  (void)e.step();
  EXPECT_EQ(e.running(), 1u);
  EXPECT_EQ(e.waiting(), 0u);
  EXPECT_EQ(e.counters().aborted_requests, 1u);
}

TEST(mocker_engine, a_prompt_that_can_never_fit_is_refused_and_a_restart_ends_everything) {
  engine e(small(/*blocks=*/4));
  e.submit(request(1, 0, 100, 1));
  const step_result refused = e.step();
  ASSERT_EQ(refused.outputs.size(), 1u);
  EXPECT_FALSE(refused.outputs[0].error.empty());
  e.submit(request(2, 0, 20, 20));
  (void)e.step();
  const auto ended = e.restart();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].error, "the engine restarted");
  EXPECT_TRUE(e.idle());
  EXPECT_EQ(e.cache().cached_blocks(), 0u);
}

}  // namespace
}  // namespace kvr::mocker

namespace kvr::mocker {
namespace {

TEST(mocker_engine, a_step_prefills_no_more_than_its_token_budget_and_the_rest_wait) {
  engine_settings settings = small(1024, 64);
  settings.max_num_batched_tokens = 500;
  engine e(settings);
  for (std::uint64_t id = 1; id <= 4; ++id) e.submit(request(id, static_cast<std::uint32_t>(id) * 1000, 320, 4));
  const step_result first = e.step();
  EXPECT_EQ(first.outputs.size(), 2u) << "320 tokens leave budget for one more; 640 use it up";
  EXPECT_EQ(e.waiting(), 2u);
  const step_result second = e.step();
  EXPECT_EQ(e.waiting(), 0u);
  EXPECT_EQ(second.outputs.size(), 4u) << "two decode tokens and two first tokens";

  engine unbounded(small(1024, 64));
  for (std::uint64_t id = 1; id <= 4; ++id) unbounded.submit(request(id, static_cast<std::uint32_t>(id) * 1000, 320, 4));
  EXPECT_EQ(unbounded.step().outputs.size(), 4u) << "without a budget every waiting prompt is admitted";
}

}  // namespace
}  // namespace kvr::mocker
