#include "core/loadgen/offered_load.hpp"

#include <gtest/gtest.h>

namespace kvr::loadgen {
namespace {

std::vector<request_spec> requests_of(std::initializer_list<std::pair<double, std::size_t>> arrival_and_tokens) {
  std::vector<request_spec> out;
  for (const auto& [at, tokens] : arrival_and_tokens)
    out.push_back({.arrival_s = at, .prompt = std::vector<std::uint32_t>(tokens, 7), .messages_json = {}, .max_tokens = 10});
  return out;
}

TEST(offered_load, a_requests_cold_work_is_its_prefill_plus_a_decode_slot_per_output_token) {
  mocker::timing_model timing;  // 50 us per prompt token, 150 us per sequence and step
  timing.speedup = 2;
  const auto requests = requests_of({{0, 1000}, {1, 3000}});
  EXPECT_DOUBLE_EQ(mean_cold_work_us(requests, timing), (2000 * 50.0 + 10 * 150.0) / 2);
}

TEST(offered_load, the_rate_for_a_utilization_fills_that_share_of_every_engines_time) {
  mocker::timing_model timing;
  timing.decode_us_per_sequence = 0;
  const auto requests = requests_of({{0, 2000}});  // 100 ms of prefill each
  EXPECT_DOUBLE_EQ(rate_for_utilization(requests, timing, 4, 0.5), 20.0) << "4 engines x 10 requests/s x 0.5";
  EXPECT_DOUBLE_EQ(rate_for_utilization({}, timing, 4, 0.5), 0.0);
}

TEST(offered_load, scaling_arrivals_reaches_the_rate_and_keeps_their_shape) {
  auto requests = requests_of({{10, 1}, {11, 1}, {11.5, 1}, {14, 1}, {15, 1}});
  EXPECT_DOUBLE_EQ(mean_arrival_rate(requests), 4.0 / 5);
  scale_arrivals(requests, 8.0);
  EXPECT_DOUBLE_EQ(mean_arrival_rate(requests), 8.0);
  EXPECT_DOUBLE_EQ(requests[0].arrival_s, 0.0);
  EXPECT_DOUBLE_EQ(requests[1].arrival_s, 0.1);
  EXPECT_DOUBLE_EQ(requests[2].arrival_s, 0.15);
  EXPECT_DOUBLE_EQ(requests[4].arrival_s, 0.5);
  auto single = requests_of({{3, 1}});
  scale_arrivals(single, 8.0);
  EXPECT_DOUBLE_EQ(single[0].arrival_s, 3.0) << "one request has no rate to scale";
}

}  // namespace
}  // namespace kvr::loadgen
