#include "core/replica/remote_bookings.hpp"

#include <gtest/gtest.h>

namespace kvr {
namespace {

using namespace std::chrono_literals;

const time_point t0{};

/// Messages from one replica, numbered in order as a real sender numbers them.
struct sender {
  std::string replica = "r1";
  std::uint64_t incarnation = 1;
  std::uint64_t sequence = 0;

  peer_origin next() { return {.replica = replica, .incarnation = incarnation, .sequence = ++sequence, .sent_unix_ns = 0}; }
  peer_bookings_message events(std::vector<peer_event> list) { return {.origin = next(), .events = std::move(list)}; }
  peer_snapshot_message snapshot(std::vector<peer_snapshot_entry> list, std::uint32_t part = 0, std::uint32_t parts = 1) {
    return {.origin = next(), .part = part, .parts = parts, .bookings = std::move(list)};
  }
};

peer_event booked(std::uint64_t id, std::string worker, std::uint32_t tokens, std::vector<std::uint64_t> hashes = {}) {
  return {.what = peer_event::kind::booked, .request_id = id, .worker = std::move(worker), .prompt_tokens = tokens,
          .overlap_blocks = 0, .sequence_hashes = std::move(hashes)};
}
peer_event first_token(std::uint64_t id) { return {.what = peer_event::kind::first_token, .request_id = id}; }
peer_event finished(std::uint64_t id) { return {.what = peer_event::kind::finished, .request_id = id}; }

remote_bookings two_workers() {
  return remote_bookings({"w0", "w1"}, {.block_size = 16, .track_active_blocks = true, .peer_timeout = 3s});
}

TEST(remote_bookings, a_peers_booking_counts_on_its_worker_until_it_finishes) {
  remote_bookings remote = two_workers();
  sender r1;
  remote.apply(r1.events({booked(1, "w1", 64)}), t0);
  EXPECT_EQ(remote.load(1), (worker_load{.prefill_tokens = 64, .decode_blocks = 4, .requests = 1, .awaiting_first_token = 1}));
  EXPECT_EQ(remote.load(0), worker_load{});
  remote.apply(r1.events({first_token(1)}), t0);
  EXPECT_EQ(remote.load(1).prefill_tokens, 0u);
  remote.apply(r1.events({finished(1)}), t0);
  EXPECT_EQ(remote.load(1), worker_load{});
}

TEST(remote_bookings, loads_of_several_peers_add_up_and_stay_apart_per_peer) {
  remote_bookings remote = two_workers();
  sender r1, r2{.replica = "r2"};
  remote.apply(r1.events({booked(1, "w0", 16)}), t0);
  remote.apply(r2.events({booked(1, "w0", 32)}), t0);  // the same request id from another replica is another request
  EXPECT_EQ(remote.load(0).requests, 2u);
  EXPECT_EQ(remote.load(0).prefill_tokens, 48u);
  remote.apply(r1.events({finished(1)}), t0);
  EXPECT_EQ(remote.load(0).prefill_tokens, 32u);
  std::vector<worker_load> loads{{.prefill_tokens = 5, .decode_blocks = 1, .requests = 1}};
  remote.add_loads(loads);
  ASSERT_EQ(loads.size(), 2u);
  EXPECT_EQ(loads[0].prefill_tokens, 37u);
  EXPECT_EQ(loads[0].requests, 2u);
}

TEST(remote_bookings, a_snapshot_replaces_what_was_known_of_that_peer_so_a_lost_finish_heals) {
  remote_bookings remote = two_workers();
  sender r1, r2{.replica = "r2"};
  remote.apply(r1.events({booked(1, "w0", 16), booked(2, "w1", 16)}), t0);
  remote.apply(r2.events({booked(9, "w1", 160)}), t0);
  // r1's "finished 1" was lost; its snapshot lists only request 2, already prefilled.
  remote.apply(r1.snapshot({{.request_id = 2, .worker = "w1", .prompt_tokens = 16, .overlap_blocks = 0, .prefilled = true}}), t0 + 1s);
  EXPECT_EQ(remote.load(0), worker_load{});
  EXPECT_EQ(remote.load(1).requests, 2u);                // r1's request 2 and r2's request 9
  EXPECT_EQ(remote.load(1).prefill_tokens, 160u);        // r2's untouched, r1's prefilled
  EXPECT_EQ(remote.counters().snapshots, 1u);
}

TEST(remote_bookings, a_snapshot_keeps_the_block_hashes_its_bookings_were_announced_with) {
  remote_bookings remote = two_workers();
  sender r1;
  remote.apply(r1.events({booked(1, "w0", 32, {11, 12}), booked(2, "w0", 32, {11, 12})}), t0);
  EXPECT_EQ(remote.load(0).decode_blocks, 2u);  // shared blocks count once
  EXPECT_EQ(remote.active_prefix_blocks(0, std::vector<std::uint64_t>{11, 12, 13}), 2u);
  remote.apply(r1.snapshot({{.request_id = 1, .worker = "w0", .prompt_tokens = 32},
                            {.request_id = 2, .worker = "w0", .prompt_tokens = 32}}),
               t0 + 1s);
  EXPECT_EQ(remote.load(0).decode_blocks, 2u);
  EXPECT_EQ(remote.active_prefix_blocks(0, std::vector<std::uint64_t>{11, 12, 13}), 2u);
}

TEST(remote_bookings, a_snapshot_in_parts_applies_once_every_part_came_and_not_when_one_is_lost) {
  remote_bookings remote = two_workers();
  sender r1;
  remote.apply(r1.events({booked(1, "w0", 16)}), t0);
  remote.apply(r1.snapshot({{.request_id = 5, .worker = "w1", .prompt_tokens = 16}}, 0, 2), t0);
  EXPECT_EQ(remote.load(1).requests, 0u);  // half a snapshot changes nothing
  remote.apply(r1.snapshot({{.request_id = 6, .worker = "w1", .prompt_tokens = 16}}, 1, 2), t0);
  EXPECT_EQ(remote.load(1).requests, 2u);
  EXPECT_EQ(remote.load(0).requests, 0u);
  // The next snapshot's part 0 is lost: its part 1 alone is ignored.
  r1.next();
  remote.apply(r1.snapshot({}, 1, 2), t0);
  EXPECT_EQ(remote.load(1).requests, 2u);
  EXPECT_EQ(remote.counters().gaps, 1u);
}

TEST(remote_bookings, a_peer_silent_past_the_timeout_is_dropped_with_all_its_bookings) {
  remote_bookings remote = two_workers();
  sender r1, r2{.replica = "r2"};
  remote.apply(r1.events({booked(1, "w0", 16)}), t0);
  remote.apply(r2.events({booked(1, "w0", 16)}), t0 + 2s);
  EXPECT_EQ(remote.expire(t0 + 3s), 0u);
  EXPECT_EQ(remote.expire(t0 + 3s + 1ms), 1u);
  EXPECT_EQ(remote.load(0).requests, 1u);  // r2's
  ASSERT_EQ(remote.peers(t0 + 3s).size(), 1u);
  EXPECT_EQ(remote.peers(t0 + 3s)[0].replica, "r2");
  EXPECT_EQ(remote.counters().peers_dropped, 1u);
}

TEST(remote_bookings, a_restarted_peer_starts_afresh_and_its_old_bookings_go) {
  remote_bookings remote = two_workers();
  sender r1;
  remote.apply(r1.events({booked(1, "w0", 16), booked(2, "w0", 16)}), t0);
  sender reborn{.replica = "r1", .incarnation = 2};
  remote.apply(reborn.events({booked(3, "w1", 16)}), t0);
  EXPECT_EQ(remote.load(0).requests, 0u);
  EXPECT_EQ(remote.load(1).requests, 1u);
  EXPECT_EQ(remote.counters().peers_restarted, 1u);
}

TEST(remote_bookings, bookings_on_unknown_workers_and_stale_or_repeated_messages_are_counted_and_dropped) {
  remote_bookings remote = two_workers();
  sender r1;
  const auto first = r1.events({booked(1, "elsewhere", 16), booked(2, "w0", 16)});
  remote.apply(first, t0);
  remote.apply(first, t0);  // delivered twice
  EXPECT_EQ(remote.load(0).requests, 1u);
  EXPECT_EQ(remote.counters().unknown_workers, 1u);
  EXPECT_EQ(remote.counters().stale, 1u);
  remote.apply(r1.snapshot({{.request_id = 7, .worker = "elsewhere", .prompt_tokens = 16}}), t0);
  EXPECT_EQ(remote.counters().unknown_workers, 2u);
}

TEST(remote_bookings, a_lost_message_is_counted_as_a_gap) {
  remote_bookings remote = two_workers();
  sender r1;
  remote.apply(r1.events({booked(1, "w0", 16)}), t0);
  r1.next();
  remote.apply(r1.events({booked(2, "w0", 16)}), t0);
  EXPECT_EQ(remote.counters().gaps, 1u);
  EXPECT_EQ(remote.load(0).requests, 2u);
}

TEST(remote_bookings, what_peers_can_make_it_hold_is_bounded) {
  remote_bookings remote({"w0"}, {.block_size = 16, .track_active_blocks = false, .max_peers = 2, .max_bookings_per_peer = 3});
  sender r1, r2{.replica = "r2"}, r3{.replica = "r3"};
  remote.apply(r1.events({booked(1, "w0", 16), booked(2, "w0", 16), booked(3, "w0", 16), booked(4, "w0", 16)}), t0);
  remote.apply(r2.events({}), t0);
  remote.apply(r3.events({booked(1, "w0", 16)}), t0);
  EXPECT_EQ(remote.load(0).requests, 3u);
  EXPECT_EQ(remote.peers(t0).size(), 2u);
  EXPECT_EQ(remote.counters().over_limit, 2u);
  std::vector<peer_snapshot_entry> many(10, {.request_id = 0, .worker = "w0", .prompt_tokens = 1});
  for (std::uint64_t i = 0; i < many.size(); ++i) many[i].request_id = 100 + i;
  remote.apply(r1.snapshot(many), t0);
  EXPECT_EQ(remote.load(0).requests, 3u);
}

}  // namespace
}  // namespace kvr
