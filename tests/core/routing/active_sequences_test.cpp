#include "core/routing/active_sequences.hpp"

#include <random>

#include <gtest/gtest.h>

namespace kvr {
namespace {

using std::chrono::seconds;
const time_point t0{};

TEST(active_sequences, booking_adds_uncached_prefill_tokens_and_the_requests_blocks) {
  active_sequences active(16, true, seconds(600));
  // 100 tokens, 2 blocks cached: 68 tokens to prefill, ceil(100 / 16) = 7 blocks held.
  ASSERT_TRUE(active.book({.request_id = 1, .worker = 3, .prompt_tokens = 100, .overlap_blocks = 2}, t0));
  EXPECT_EQ(active.load(3), (worker_load{68, 7, 1, 1}));
  EXPECT_EQ(active.load(0), worker_load{});
}

TEST(active_sequences, the_first_token_ends_prefill_and_release_ends_the_rest) {
  active_sequences active(16, true, seconds(600));
  active.book({.request_id = 1, .worker = 0, .prompt_tokens = 32, .overlap_blocks = 0}, t0);
  EXPECT_EQ(active.load(0).awaiting_first_token, 1u);
  active.first_token(1);
  active.first_token(1);  // a second first token changes nothing
  EXPECT_EQ(active.load(0), (worker_load{0, 2, 1, 0}));
  active.release(1);
  EXPECT_EQ(active.load(0), worker_load{});
  EXPECT_EQ(active.in_flight(), 0u);
}

TEST(active_sequences, releasing_twice_or_an_unknown_id_is_harmless) {
  active_sequences active(16, true, seconds(600));
  active.book({.request_id = 5, .worker = 1, .prompt_tokens = 16}, t0);
  active.release(5);
  active.release(5);
  active.release(99);
  active.first_token(99);
  EXPECT_EQ(active.load(1), worker_load{});
  EXPECT_EQ(active.counters().unknown_releases, 3u);
}

TEST(active_sequences, a_duplicate_booking_is_refused_without_changing_loads) {
  active_sequences active(16, true, seconds(600));
  EXPECT_TRUE(active.book({.request_id = 5, .worker = 1, .prompt_tokens = 16}, t0));
  EXPECT_FALSE(active.book({.request_id = 5, .worker = 2, .prompt_tokens = 160}, t0));
  EXPECT_EQ(active.load(1), (worker_load{16, 1, 1, 1}));
  EXPECT_EQ(active.load(2), worker_load{});
}

TEST(active_sequences, overlap_beyond_the_prompt_leaves_no_prefill) {
  active_sequences active(16, true, seconds(600));
  active.book({.request_id = 1, .worker = 0, .prompt_tokens = 20, .overlap_blocks = 5}, t0);
  EXPECT_EQ(active.load(0).prefill_tokens, 0u);
}

TEST(active_sequences, without_block_tracking_only_prefill_counts) {
  active_sequences active(16, false, seconds(600));
  active.book({.request_id = 1, .worker = 0, .prompt_tokens = 64}, t0);
  EXPECT_EQ(active.load(0), (worker_load{64, 0, 1, 1}));
}

TEST(active_sequences, stale_bookings_expire_and_fresh_ones_stay) {
  active_sequences active(16, true, seconds(60));
  active.book({.request_id = 1, .worker = 0, .prompt_tokens = 16}, t0);
  active.book({.request_id = 2, .worker = 0, .prompt_tokens = 32}, t0 + seconds(30));
  EXPECT_EQ(active.expire(t0 + seconds(59)), 0u);
  EXPECT_EQ(active.expire(t0 + seconds(60)), 1u);
  EXPECT_EQ(active.load(0), (worker_load{32, 2, 1, 1}));
  active.release(2);
  EXPECT_EQ(active.expire(t0 + seconds(1000)), 0u) << "a released booking does not expire again";
  EXPECT_EQ(active.counters().expired, 1u);
}

TEST(active_sequences, loads_return_to_exactly_zero_after_any_mix_of_endings) {
  std::mt19937_64 rng(42);
  active_sequences active(16, true, seconds(30));
  std::vector<std::uint64_t> open;
  time_point now = t0;
  for (std::uint64_t id = 1; id <= 20000; ++id) {
    now += std::chrono::milliseconds(rng() % 20);
    active.book({.request_id = id, .worker = static_cast<worker_id>(rng() % 8),
                 .prompt_tokens = static_cast<std::uint32_t>(rng() % 5000),
                 .overlap_blocks = static_cast<std::uint32_t>(rng() % 100)},
                now);
    open.push_back(id);
    while (!open.empty() && rng() % 3 != 0) {
      const std::size_t pick = rng() % open.size();
      const std::uint64_t victim = open[pick];
      switch (rng() % 4) {
        case 0: active.first_token(victim); break;  // still in flight
        case 1: active.release(victim); active.release(victim); [[fallthrough]];
        default:
          active.release(victim);
          open[pick] = open.back();
          open.pop_back();
      }
    }
    active.expire(now);
  }
  for (std::uint64_t id : open) active.release(id);
  for (worker_id w = 0; w < 8; ++w) EXPECT_EQ(active.load(w), worker_load{}) << w;
  EXPECT_EQ(active.in_flight(), 0u);
}

TEST(active_sequences, requests_sharing_a_prefix_on_one_worker_hold_its_blocks_once) {
  active_sequences active(16, true, std::chrono::hours(1));
  const time_point t0{};
  const std::vector<std::uint64_t> a = {11, 12, 13, 14};  // 4 full blocks of a group's prompt
  const std::vector<std::uint64_t> b = {11, 12, 13, 99};  // same group, another question
  active.book({.request_id = 1, .worker = 0, .prompt_tokens = 70}, t0, a);  // + 1 partial block
  EXPECT_EQ(active.load(0).decode_blocks, 5u);
  EXPECT_EQ(active.active_prefix_blocks(0, b), 3u);
  EXPECT_EQ(active.active_prefix_blocks(1, b), 0u);
  active.book({.request_id = 2, .worker = 0, .prompt_tokens = 64}, t0, b);
  EXPECT_EQ(active.load(0).decode_blocks, 6u) << "blocks 11, 12, 13 counted once";
  active.release(1);
  EXPECT_EQ(active.load(0).decode_blocks, 4u);
  EXPECT_EQ(active.active_prefix_blocks(0, a), 3u);
  active.release(2);
  EXPECT_EQ(active.load(0), worker_load{});
  EXPECT_EQ(active.active_prefix_blocks(0, a), 0u);
}

TEST(active_sequences, without_block_tracking_nothing_is_held) {
  active_sequences active(16, false, std::chrono::hours(1));
  const std::vector<std::uint64_t> a = {1, 2};
  active.book({.request_id = 1, .worker = 0, .prompt_tokens = 32}, time_point{}, a);
  EXPECT_EQ(active.load(0).decode_blocks, 0u);
  EXPECT_EQ(active.active_prefix_blocks(0, a), 0u);
}

}  // namespace
}  // namespace kvr
