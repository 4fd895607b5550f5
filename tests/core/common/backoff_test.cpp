#include "core/common/backoff.hpp"

#include <gtest/gtest.h>

namespace kvr {
namespace {

using namespace std::chrono_literals;

TEST(restart_backoff, doubles_while_a_component_keeps_dying_up_to_its_maximum) {
  restart_backoff backoff(100ms, 1s, 60s);
  const time_point t0{};
  std::vector<duration> delays;
  for (int i = 0; i < 6; ++i) delays.push_back(backoff.on_failure(t0 + i * 1s, t0 + i * 1s + 10ms));
  EXPECT_EQ(delays, (std::vector<duration>{100ms, 200ms, 400ms, 800ms, 1s, 1s}));
}

TEST(restart_backoff, starts_again_from_the_initial_delay_after_a_stable_run) {
  restart_backoff backoff(100ms, 10s, 60s);
  const time_point t0{};
  (void)backoff.on_failure(t0, t0 + 1s);
  EXPECT_EQ(backoff.on_failure(t0 + 1s, t0 + 2s), 200ms);
  EXPECT_EQ(backoff.on_failure(t0 + 2s, t0 + 62s), 100ms);  // ran 60 s: stable
  EXPECT_EQ(backoff.on_failure(t0 + 62s, t0 + 63s), 200ms);
}

}  // namespace
}  // namespace kvr
