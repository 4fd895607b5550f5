#include "core/routing/selector/candidates.hpp"

#include <gtest/gtest.h>

namespace kvr {
namespace {

TEST(candidates, a_data_parallel_worker_counts_its_best_rank) {
  std::vector<std::uint32_t> out;
  // Publishers 0, 1 are worker 0's ranks; publisher 2 is worker 1.
  overlaps_by_worker(std::vector<std::uint32_t>{3, 7, 2}, std::vector<std::uint32_t>{0, 0, 1}, 3, out);
  EXPECT_EQ(out, (std::vector<std::uint32_t>{7, 2, 0}));
}

TEST(candidates, unhealthy_and_excluded_workers_are_left_out) {
  std::vector<worker_candidate> out;
  const std::vector<worker_load> loads{{16, 1, 1}, {0, 0, 0}, {32, 2, 1}, {0, 0, 0}};
  const std::uint8_t healthy[] = {1, 0, 1, 1};
  collect_candidates(std::vector<std::uint32_t>{5, 6, 7, 8}, loads, healthy, std::vector<std::uint32_t>{2}, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].worker, 0u);
  EXPECT_EQ(out[0].overlap_blocks, 5u);
  EXPECT_EQ(out[0].active_prefill_tokens, 16u);
  EXPECT_EQ(out[1].worker, 3u);
  EXPECT_EQ(out[1].overlap_blocks, 8u);
}

}  // namespace
}  // namespace kvr
