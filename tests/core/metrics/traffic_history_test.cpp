#include "core/metrics/traffic_history.hpp"

#include <gtest/gtest.h>

namespace kvr {
namespace {

TEST(traffic_history, rates_are_the_counters_differences_over_the_time_between_samples) {
  traffic_history history;
  history.record({.seconds = 10, .requests = 100, .prompt_blocks = 1000, .overlap_blocks = 200});
  history.record({.seconds = 12, .requests = 110, .prompt_blocks = 1100, .overlap_blocks = 275});
  history.record({.seconds = 14, .requests = 110, .prompt_blocks = 1100, .overlap_blocks = 275});
  const auto rates = history.rates();
  ASSERT_EQ(rates.size(), 2u);
  EXPECT_DOUBLE_EQ(rates[0].seconds, 12);
  EXPECT_DOUBLE_EQ(rates[0].requests_per_second, 5);
  ASSERT_TRUE(rates[0].hit_rate);
  EXPECT_DOUBLE_EQ(*rates[0].hit_rate, 0.75);
  EXPECT_DOUBLE_EQ(rates[1].requests_per_second, 0);
  EXPECT_FALSE(rates[1].hit_rate) << "no prompt block routed: no hit rate, rather than 0";
}

TEST(traffic_history, keeps_only_the_last_samples) {
  traffic_history history(3);
  for (int i = 0; i < 10; ++i) history.record({.seconds = double(i), .requests = std::uint64_t(i * i)});
  EXPECT_EQ(history.samples(), 3u);
  const auto rates = history.rates();
  ASSERT_EQ(rates.size(), 2u);
  EXPECT_DOUBLE_EQ(rates[0].requests_per_second, 64 - 49);
  EXPECT_DOUBLE_EQ(rates[1].requests_per_second, 81 - 64);
}

TEST(traffic_history, ignores_samples_out_of_order_and_starts_over_when_counters_restart) {
  traffic_history history;
  history.record({.seconds = 5, .requests = 50});
  history.record({.seconds = 5, .requests = 60});
  history.record({.seconds = 4, .requests = 70});
  EXPECT_EQ(history.samples(), 1u);
  history.record({.seconds = 7, .requests = 3});  // the set restarted: its counters are new
  EXPECT_EQ(history.samples(), 1u);
  EXPECT_TRUE(history.rates().empty()) << "no rate across a restart (it would be negative)";
  history.record({.seconds = 9, .requests = 7});
  ASSERT_EQ(history.rates().size(), 1u);
  EXPECT_DOUBLE_EQ(history.rates()[0].requests_per_second, 2);
}

}  // namespace
}  // namespace kvr
