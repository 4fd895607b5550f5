#include "core/routing/selector/cost.hpp"

#include <gtest/gtest.h>

namespace kvr {
namespace {

struct cost_row {
  const char* why;
  worker_candidate worker;
  cost_params params;
  double expected;
};

// cost = scale * (prefill_tokens / bs + max(0, ceil(isl / bs) - credit * overlap))
//        + decode_blocks + max(0, ceil(isl / bs) - active_overlap) + eviction_weight * evicted
TEST(kv_cost, follows_the_documented_formula_row_by_row) {
  const cost_row rows[] = {
      {"idle worker, nothing cached", {0, 0, 0, 0}, {160, 16, 1.0, 1.0}, 10 + 10},
      {"everything cached", {0, 10, 0, 0}, {160, 16, 1.0, 1.0}, 0 + 10},
      {"half cached", {0, 5, 0, 0}, {160, 16, 1.0, 1.0}, 5 + 10},
      {"overlap beyond the prompt is capped at zero prefill", {0, 50, 0, 0}, {160, 16, 1.0, 1.0}, 0 + 10},
      {"partial last block rounds up", {0, 0, 0, 0}, {161, 16, 1.0, 1.0}, 11 + 11},
      {"credit 0 ignores the cache", {0, 10, 0, 0}, {160, 16, 0.0, 1.0}, 10 + 10},
      {"credit 2 doubles the cache's worth", {0, 3, 0, 0}, {160, 16, 2.0, 1.0}, 4 + 10},
      {"credit 0.5 halves it", {0, 4, 0, 0}, {160, 16, 0.5, 1.0}, 8 + 10},
      {"queued prefill counts in blocks", {0, 0, 320, 0}, {160, 16, 1.0, 1.0}, 20 + 10 + 10},
      {"fractional queued prefill stays fractional", {0, 0, 8, 0}, {160, 16, 1.0, 1.0}, 0.5 + 10 + 10},
      {"held decode blocks add one for one", {0, 0, 0, 7}, {160, 16, 1.0, 1.0}, 10 + 17},
      {"prefill scale 2 doubles prefill only", {0, 0, 32, 3}, {160, 16, 1.0, 2.0}, 2 * (2 + 10) + 13},
      {"prefill scale 0 leaves decode only", {0, 0, 32, 3}, {160, 16, 1.0, 0.0}, 13},
      {"empty prompt", {0, 0, 0, 0}, {0, 16, 1.0, 1.0}, 0},
      {"block size 64", {0, 1, 64, 2}, {200, 64, 1.0, 1.0}, (1 + 3) + (2 + 4)},
      {"blocks in-flight requests already hold add no load", {0, 8, 0, 9, 8}, {160, 16, 1.0, 1.0}, 2 + (9 + 2)},
      {"held overlap beyond the prompt adds nothing", {0, 0, 0, 20, 15}, {160, 16, 1.0, 1.0}, 10 + 20},
      {"each block the prompt would evict costs the eviction weight", {0, 4, 0, 0, 0, 6}, {160, 16, 1.0, 1.0, 8.0}, 6 + 10 + 48},
      {"eviction weight 0 ignores evictions", {0, 4, 0, 0, 0, 6}, {160, 16, 1.0, 1.0, 0.0}, 6 + 10},
  };
  for (const cost_row& row : rows) EXPECT_DOUBLE_EQ(kv_cost(row.worker, row.params), row.expected) << row.why;
}

TEST(booked_load, counts_prefill_tokens_in_blocks_plus_held_blocks) {
  EXPECT_DOUBLE_EQ(booked_load({0, 99, 48, 5}, 16), 3 + 5);
  EXPECT_DOUBLE_EQ(booked_load({0, 0, 0, 0}, 16), 0);
}

}  // namespace
}  // namespace kvr
