#include "core/routing/admission_queue.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvr {
namespace {

using namespace std::chrono_literals;

const time_point t0{};
const admission_settings small{.capacity = 4, .timeout = 60s, .age_boost = 10s};

std::vector<std::uint64_t> drain(admission_queue<std::string>& queue, time_point now) {
  std::vector<std::uint64_t> order;
  while (!queue.empty()) order.push_back(queue.pop_head(now).id);
  return order;
}

TEST(admission_queue, serves_higher_priority_first_then_arrival_order) {
  admission_queue<std::string> queue(small);
  ASSERT_TRUE(queue.push(1, request_priority::normal, t0, "a"));
  ASSERT_TRUE(queue.push(2, request_priority::low, t0 + 1ms, "b"));
  ASSERT_TRUE(queue.push(3, request_priority::high, t0 + 2ms, "c"));
  ASSERT_TRUE(queue.push(4, request_priority::normal, t0 + 3ms, "d"));
  EXPECT_EQ(queue.head(t0 + 4ms)->payload, "c");
  EXPECT_EQ(drain(queue, t0 + 4ms), (std::vector<std::uint64_t>{3, 1, 4, 2}));
}

TEST(admission_queue, refuses_a_request_when_full_and_keeps_the_ones_it_holds) {
  admission_queue<std::string> queue(small);
  for (std::uint64_t id = 1; id <= 4; ++id) ASSERT_TRUE(queue.push(id, request_priority::low, t0, "x"));
  EXPECT_FALSE(queue.push(5, request_priority::high, t0, "y"));
  EXPECT_EQ(queue.size(), 4u);
  EXPECT_EQ(queue.size(request_priority::high), 0u);
}

TEST(admission_queue, a_waiting_request_moves_up_one_class_per_age_boost) {
  EXPECT_EQ(effective_priority(request_priority::low, 9s, 10s), request_priority::low);
  EXPECT_EQ(effective_priority(request_priority::low, 10s, 10s), request_priority::normal);
  EXPECT_EQ(effective_priority(request_priority::low, 25s, 10s), request_priority::high);
  EXPECT_EQ(effective_priority(request_priority::high, 100s, 10s), request_priority::high);

  admission_queue<std::string> queue(small);
  ASSERT_TRUE(queue.push(1, request_priority::low, t0, "old low"));
  ASSERT_TRUE(queue.push(2, request_priority::normal, t0 + 5s, "newer normal"));
  EXPECT_EQ(queue.head(t0 + 6s)->id, 2u) << "before its boost the low request waits";
  EXPECT_EQ(queue.head(t0 + 10s)->id, 1u) << "boosted to normal, it is older, so it goes first";
}

TEST(admission_queue, low_priority_is_not_starved_by_a_steady_stream_of_high) {
  admission_queue<std::string> queue({.capacity = 100, .timeout = 600s, .age_boost = 10s});
  ASSERT_TRUE(queue.push(1, request_priority::low, t0, "low"));
  std::uint64_t next = 2;
  time_point now = t0;
  // One high request arrives and one is served every second; the low one is boosted to high
  // after 20 s and, being older than every high request then waiting, is served.
  for (int second = 0; second < 30; ++second) {
    now = t0 + std::chrono::seconds(second);
    ASSERT_TRUE(queue.push(next++, request_priority::high, now, "high"));
    if (queue.pop_head(now).id == 1) {
      EXPECT_EQ(second, 20);
      return;
    }
  }
  FAIL() << "the low-priority request was never served";
}

TEST(admission_queue, expires_requests_older_than_the_timeout_across_classes) {
  admission_queue<std::string> queue(small);
  ASSERT_TRUE(queue.push(1, request_priority::normal, t0, "a"));
  ASSERT_TRUE(queue.push(2, request_priority::high, t0 + 30s, "b"));
  ASSERT_TRUE(queue.push(3, request_priority::low, t0 + 1s, "c"));
  EXPECT_EQ(queue.next_timeout(), t0 + 60s);
  std::vector<std::uint64_t> expired;
  queue.expire(t0 + 61s, [&](auto&& entry) { expired.push_back(entry.id); });
  EXPECT_EQ(expired, (std::vector<std::uint64_t>{1, 3}));  // class by class, oldest first within each
  EXPECT_EQ(queue.size(), 1u);
  EXPECT_EQ(queue.next_timeout(), t0 + 90s);
}

TEST(admission_queue, removes_a_withdrawn_request_wherever_it_waits) {
  admission_queue<std::string> queue(small);
  ASSERT_TRUE(queue.push(1, request_priority::normal, t0, "a"));
  ASSERT_TRUE(queue.push(2, request_priority::normal, t0, "b"));
  ASSERT_TRUE(queue.push(3, request_priority::low, t0, "c"));
  EXPECT_EQ(queue.remove(2), std::optional<std::string>("b"));
  EXPECT_EQ(queue.remove(2), std::nullopt);
  EXPECT_EQ(drain(queue, t0), (std::vector<std::uint64_t>{1, 3}));
  EXPECT_EQ(queue.head(t0), nullptr);
  EXPECT_EQ(queue.next_timeout(), std::nullopt);
}

TEST(admission_queue, reads_the_priority_header_case_insensitively_and_refuses_other_values) {
  EXPECT_EQ(parse_priority("high"), request_priority::high);
  EXPECT_EQ(parse_priority("Normal"), request_priority::normal);
  EXPECT_EQ(parse_priority("LOW"), request_priority::low);
  EXPECT_EQ(parse_priority("urgent"), std::nullopt);
  EXPECT_EQ(parse_priority(""), std::nullopt);
  EXPECT_EQ(parse_priority("highest"), std::nullopt);
}

}  // namespace
}  // namespace kvr
