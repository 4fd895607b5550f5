// The peer inbox between the replica hub and a set's scorer: when a peer message wakes the
// scorer, and that what waits is taken whole and in order.

#include "actors/replica/peer_inbox.hpp"

#include <gtest/gtest.h>

namespace kvr {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

peer_message_ptr message(std::uint64_t sequence) {
  return std::make_shared<const peer_message>(peer_bookings_message{.origin = {.replica = "r2", .sequence = sequence}});
}

std::uint64_t sequence_of(const peer_message_ptr& m) { return std::get<peer_bookings_message>(*m).origin.sequence; }

TEST(peer_inbox, a_message_wakes_the_scorer_once_its_status_is_due_and_once_until_it_takes) {
  peer_inbox inbox;
  const auto t0 = steady::now();
  inbox.wake_from(t0 + 10ms);
  EXPECT_EQ(inbox_push::left, inbox.push(message(1), t0)) << "woken while its status is not due";
  EXPECT_EQ(inbox_push::left_wake_scorer, inbox.push(message(2), t0 + 10ms));
  EXPECT_EQ(inbox_push::left, inbox.push(message(3), t0 + 11ms)) << "woken twice before it took";
  const auto taken = inbox.take();
  ASSERT_EQ(taken.size(), 3u);
  EXPECT_EQ(sequence_of(taken[0]), 1u);
  EXPECT_EQ(sequence_of(taken[2]), 3u);
  EXPECT_TRUE(inbox.take().empty());
  EXPECT_EQ(inbox_push::left_wake_scorer, inbox.push(message(4), t0 + 12ms)) << "not woken again after it took";
}

TEST(peer_inbox, while_requests_wait_in_its_queue_every_message_wakes_the_scorer_once_until_it_takes) {
  peer_inbox inbox;
  const auto t0 = steady::now();
  inbox.wake_from(t0 + 1h);
  inbox.set_queue_waiting(true);
  EXPECT_EQ(inbox_push::left_wake_scorer, inbox.push(message(1), t0));
  EXPECT_EQ(inbox_push::left, inbox.push(message(2), t0));
  EXPECT_EQ(inbox.take().size(), 2u);
  EXPECT_EQ(inbox_push::left_wake_scorer, inbox.push(message(3), t0));
  inbox.take();
  inbox.set_queue_waiting(false);
  EXPECT_EQ(inbox_push::left, inbox.push(message(4), t0)) << "woken with nothing waiting and its status not due";
}

TEST(peer_inbox, a_scorer_that_does_not_take_is_left_no_more_than_the_capacity) {
  peer_inbox inbox;
  const auto t0 = steady::now();
  for (std::size_t i = 0; i < peer_inbox::capacity; ++i) ASSERT_NE(inbox.push(message(i), t0), inbox_push::full);
  EXPECT_EQ(inbox.push(message(0), t0), inbox_push::full);
  EXPECT_EQ(inbox.take().size(), peer_inbox::capacity);
  EXPECT_NE(inbox.push(message(1), t0), inbox_push::full);
}

}  // namespace
}  // namespace kvr
