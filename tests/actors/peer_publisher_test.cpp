// The replica publisher driven directly (no NATS, no CAF system): what it hands its sink, in
// what order, numbered how.

#include "actors/replica/peer_publisher.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/replica/peer_wire.hpp"

namespace kvr {
namespace {

using namespace std::chrono_literals;

/// Collects what the publisher publishes, decoded.
struct capture {
  std::mutex mutex;
  std::condition_variable arrived;
  std::vector<std::pair<std::string, peer_message>> messages;
  bool connected = true;

  peer_publisher::sink sink() {
    return [this](const std::string& subject, std::span<const std::uint8_t> bytes) {
      std::lock_guard lock(mutex);
      if (!connected) return false;
      auto decoded = decode_peer_message(bytes);
      EXPECT_TRUE(decoded) << decoded.error();
      if (decoded) messages.emplace_back(subject, std::move(*decoded));
      arrived.notify_all();
      return true;
    };
  }
  /// Waits until `count` messages came (or a second passed); returns how many did.
  std::size_t wait_for(std::size_t count) {
    std::unique_lock lock(mutex);
    arrived.wait_for(lock, 1s, [&] { return messages.size() >= count; });
    return messages.size();
  }
};

peer_event booked(std::uint64_t id) {
  return {.what = peer_event::kind::booked, .request_id = id, .worker = "w0", .prompt_tokens = 16};
}

const caf::actor_addr scorer{};  // the publisher only compares addresses

TEST(peer_publisher, batches_a_sets_steps_into_one_message_numbered_from_one) {
  capture out;
  peer_publisher publisher({.replica_id = "r1", .subject_prefix = "kvr", .batch_delay = 20ms}, out.sink());
  publisher.attach("set a", scorer);
  publisher.share("set a", scorer, {booked(1), booked(2)});
  publisher.share("set a", scorer, {booked(3)});
  ASSERT_EQ(out.wait_for(1), 1u);
  std::this_thread::sleep_for(50ms);
  std::lock_guard lock(out.mutex);
  ASSERT_EQ(out.messages.size(), 1u);
  EXPECT_EQ(out.messages[0].first, "kvr.set%20a.bookings");
  const auto& message = std::get<peer_bookings_message>(out.messages[0].second);
  EXPECT_EQ(message.origin.replica, "r1");
  EXPECT_EQ(message.origin.sequence, 1u);
  ASSERT_EQ(message.events.size(), 3u);
  EXPECT_EQ(message.events[2].request_id, 3u);
}

TEST(peer_publisher, steps_that_keep_coming_are_batched_each_step_once_in_order_and_numbered) {
  capture out;
  peer_publisher publisher({.replica_id = "r1", .batch_delay = 50ms}, out.sink());
  publisher.attach("s", scorer);
  const auto start = std::chrono::steady_clock::now();
  for (std::uint64_t id = 1; id <= 50; ++id) {  // a step every 10 ms for half a second
    publisher.share("s", scorer, {booked(id)});
    std::this_thread::sleep_until(start + id * 10ms);
  }
  const auto shared_for = std::chrono::steady_clock::now() - start;
  std::this_thread::sleep_for(150ms);
  std::lock_guard lock(out.mutex);
  std::vector<std::uint64_t> ids;
  std::uint64_t sequence = 0;
  for (const auto& [subject, message] : out.messages) {
    const auto& bookings = std::get<peer_bookings_message>(message);
    EXPECT_EQ(bookings.origin.sequence, ++sequence);
    for (const peer_event& event : bookings.events) ids.push_back(event.request_id);
  }
  ASSERT_EQ(ids.size(), 50u);
  for (std::uint64_t i = 0; i < 50; ++i) EXPECT_EQ(ids[i], i + 1);
  // A message covers at least one batch delay of steps (one more for a late thread), not one step.
  const auto batches = static_cast<std::size_t>(shared_for / 50ms) + 2;
  EXPECT_LE(out.messages.size(), batches);
  EXPECT_GE(out.messages.size(), 5u);
}

TEST(peer_publisher, a_full_batch_goes_at_once_and_is_split_at_the_batch_size) {
  capture out;
  peer_publisher publisher({.replica_id = "r1", .batch_delay = 10s, .batch_events = 4}, out.sink());
  publisher.attach("s", scorer);
  publisher.share("s", scorer, {booked(1), booked(2), booked(3), booked(4), booked(5), booked(6)});
  ASSERT_EQ(out.wait_for(2), 2u);  // long before the 10 s delay
  std::lock_guard lock(out.mutex);
  EXPECT_EQ(std::get<peer_bookings_message>(out.messages[0].second).events.size(), 4u);
  EXPECT_EQ(std::get<peer_bookings_message>(out.messages[1].second).events.size(), 2u);
  EXPECT_EQ(std::get<peer_bookings_message>(out.messages[1].second).origin.sequence, 2u);
}

TEST(peer_publisher, a_snapshot_goes_after_the_steps_shared_before_it_and_before_those_after) {
  for (int round = 0; round < 20; ++round) {  // the publisher thread may wake at any point
    capture out;
    peer_publisher publisher({.replica_id = "r1", .batch_delay = 2ms, .snapshot_part_bookings = 2}, out.sink());
    publisher.attach("s", scorer);
    publisher.share("s", scorer, {booked(1)});
    publisher.share_snapshot("s", scorer, {{.request_id = 1, .worker = "w0"}, {.request_id = 7, .worker = "w0"},
                                           {.request_id = 8, .worker = "w0"}});
    publisher.share("s", scorer, {booked(2)});
    ASSERT_EQ(out.wait_for(4), 4u);
    std::lock_guard lock(out.mutex);
    ASSERT_TRUE(std::holds_alternative<peer_bookings_message>(out.messages[0].second));
    EXPECT_EQ(std::get<peer_bookings_message>(out.messages[0].second).events.at(0).request_id, 1u);
    const auto& part0 = std::get<peer_snapshot_message>(out.messages[1].second);
    const auto& part1 = std::get<peer_snapshot_message>(out.messages[2].second);
    EXPECT_EQ(part0.parts, 2u);
    EXPECT_EQ(part1.part, 1u);
    EXPECT_EQ(part1.origin.sequence, part0.origin.sequence + 1);
    EXPECT_EQ(part0.bookings.size() + part1.bookings.size(), 3u);
    EXPECT_EQ(std::get<peer_bookings_message>(out.messages[3].second).events.at(0).request_id, 2u);
  }
}

TEST(peer_publisher, steps_of_a_scorer_that_no_longer_speaks_for_its_set_are_dropped) {
  capture out;
  peer_publisher publisher({.replica_id = "r1", .batch_delay = 1ms}, out.sink());
  publisher.share("never attached", scorer, {booked(1)});
  publisher.attach("s", scorer);
  publisher.detach("s", scorer);
  publisher.share("s", scorer, {booked(2)});
  EXPECT_EQ(out.wait_for(1), 0u);
}

TEST(peer_publisher, what_it_could_not_publish_is_counted_and_a_full_backlog_drops_steps) {
  capture out;
  out.connected = false;
  peer_publisher publisher({.replica_id = "r1", .batch_delay = 1ms, .max_pending_events = 3}, out.sink());
  publisher.attach("s", scorer);
  publisher.share("s", scorer, {booked(1), booked(2), booked(3), booked(4), booked(5)});
  for (int i = 0; i < 100 && publisher.counters().not_connected.load() == 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(publisher.counters().not_connected.load(), 1u);
  EXPECT_EQ(publisher.counters().queue_full.load(), 2u);
  EXPECT_EQ(publisher.counters().sent.load(), 0u);
}

}  // namespace
}  // namespace kvr
