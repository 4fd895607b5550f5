#include "core/routing/cache_capacity.hpp"

#include <gtest/gtest.h>

namespace kvr {
namespace {

TEST(cache_capacity, charges_no_eviction_while_a_workers_capacity_is_unknown) {
  cache_capacity caches(2);
  caches.observe(0, 1000, 0);
  EXPECT_FALSE(caches.capacity(0));
  EXPECT_EQ(caches.evicted_by(0, 1000, 500), 0u);
  EXPECT_EQ(caches.evicted_by(7, 0, 500), 0u) << "a worker it does not know";
}

TEST(cache_capacity, counts_only_the_new_blocks_beyond_the_free_room_of_a_reported_cache) {
  cache_capacity caches(1);
  caches.set_reported(0, 100, 2);  // 100 blocks per rank, two ranks
  ASSERT_EQ(caches.capacity(0), 200u);
  EXPECT_EQ(caches.evicted_by(0, 150, 30), 0u) << "fits in the 50 free blocks";
  EXPECT_EQ(caches.evicted_by(0, 150, 80), 30u);
  EXPECT_EQ(caches.evicted_by(0, 200, 80), 80u) << "full: every new block evicts one";
  EXPECT_EQ(caches.evicted_by(0, 260, 10), 10u) << "the index may briefly hold more than the cache";
}

TEST(cache_capacity, saturates_a_reported_capacity_too_large_to_multiply_by_its_ranks) {
  cache_capacity caches(1);
  caches.set_reported(0, std::uint64_t{1} << 63, 4);
  EXPECT_EQ(caches.capacity(0), UINT64_MAX) << "a hostile num_gpu_blocks does not wrap to a small cache";
  EXPECT_EQ(caches.evicted_by(0, 1000, 1000), 0u);
  caches.set_reported(0, 0, 4);
  EXPECT_FALSE(caches.capacity(0)) << "0 blocks reads as not reported";
}

TEST(cache_capacity, learns_a_capacity_from_the_most_blocks_held_once_events_remove_blocks) {
  cache_capacity caches(1);
  caches.observe(0, 40, 0);
  caches.observe(0, 64, 0);
  EXPECT_FALSE(caches.capacity(0)) << "no removal yet: the cache may still be filling";
  caches.observe(0, 60, 3);
  EXPECT_EQ(caches.capacity(0), 64u);
  caches.observe(0, 70, 3);
  EXPECT_EQ(caches.capacity(0), 70u) << "it held more than thought";
  EXPECT_EQ(caches.evicted_by(0, 66, 10), 6u);
}

TEST(cache_capacity, prefers_the_engines_reported_capacity_to_a_learned_one) {
  cache_capacity caches(1);
  caches.observe(0, 64, 1);
  caches.set_reported(0, 1000, 1);
  EXPECT_EQ(caches.capacity(0), 1000u);
}

}  // namespace
}  // namespace kvr
