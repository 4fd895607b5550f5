#include "core/routing/prefix_index.hpp"

#include <algorithm>

#include <gtest/gtest.h>

#include "core/kv/stored_block_hashes.hpp"
#include "tests/core/routing/prefix_index_fixtures.hpp"

namespace kvr {
namespace {

using namespace kvr::testing;
using std::chrono::seconds;

std::vector<std::uint32_t> overlaps(prefix_index& index, const std::vector<std::uint32_t>& block_ids) {
  std::vector<std::uint32_t> out;
  index.find_matches(request_hashes(block_ids), out);
  return out;
}

TEST(prefix_index, a_stored_prefix_matches_only_on_the_worker_that_stored_it) {
  prefix_index index(test_block_size, 1000);
  ASSERT_TRUE(index.apply_stored(1, make_stored({11, 12, 13}, std::nullopt, {100, 200, 300})));
  EXPECT_EQ(overlaps(index, {100, 200, 300, 400}), (std::vector<std::uint32_t>{0, 3}));
  EXPECT_EQ(index.total_blocks(), 3u);
  EXPECT_EQ(index.worker_blocks(1), 3u);
}

TEST(prefix_index, find_matches_stops_at_the_first_divergent_block) {
  prefix_index index(test_block_size, 1000);
  index.apply_stored(0, make_stored({1, 2, 3}, std::nullopt, {100, 200, 300}));
  EXPECT_EQ(overlaps(index, {100, 999, 300}), (std::vector<std::uint32_t>{1}));
  EXPECT_EQ(overlaps(index, {999, 200, 300}), (std::vector<std::uint32_t>{0}));
}

TEST(prefix_index, the_same_block_at_another_position_is_another_prefix) {
  prefix_index index(test_block_size, 1000);
  index.apply_stored(0, make_stored({1, 2}, std::nullopt, {100, 200}));
  EXPECT_EQ(overlaps(index, {200}), (std::vector<std::uint32_t>{0}));
}

TEST(prefix_index, a_child_event_continues_its_parents_chain) {
  prefix_index index(test_block_size, 1000);
  index.apply_stored(0, make_stored({1, 2}, std::nullopt, {100, 200}));
  ASSERT_TRUE(index.apply_stored(0, make_stored({3, 4}, 2, {300, 400})));
  EXPECT_EQ(overlaps(index, {100, 200, 300, 400}), (std::vector<std::uint32_t>{4}));
}

TEST(prefix_index, workers_with_different_engine_hashes_share_an_entry_for_equal_tokens) {
  prefix_index index(test_block_size, 1000);
  index.apply_stored(0, make_stored({1, 2}, std::nullopt, {100, 200}));
  index.apply_stored(1, make_stored({901, 902}, std::nullopt, {100, 200}));
  index.apply_stored(2, make_stored({501}, std::nullopt, {100}));
  EXPECT_EQ(overlaps(index, {100, 200}), (std::vector<std::uint32_t>{2, 2, 1}));
  EXPECT_EQ(index.entry_count(), 2u);
  EXPECT_EQ(index.total_blocks(), 5u);
}

TEST(prefix_index, a_stored_event_with_an_unknown_parent_is_counted_and_dropped) {
  prefix_index index(test_block_size, 1000);
  EXPECT_FALSE(index.apply_stored(0, make_stored({3}, 77, {300})));
  EXPECT_EQ(index.counters().unknown_parent, 1u);
  EXPECT_EQ(index.total_blocks(), 0u);
}

TEST(prefix_index, a_stored_event_of_another_block_size_or_token_count_is_counted_and_dropped) {
  prefix_index index(test_block_size, 1000);
  kv_stored wrong_size = make_stored({1}, std::nullopt, {100});
  wrong_size.block_size = 8;
  EXPECT_FALSE(index.apply_stored(0, wrong_size));
  kv_stored short_tokens = make_stored({1, 2}, std::nullopt, {100, 200});
  short_tokens.token_ids.pop_back();
  EXPECT_FALSE(index.apply_stored(0, short_tokens));
  EXPECT_EQ(index.counters().malformed_stored, 2u);
  EXPECT_EQ(index.total_blocks(), 0u);
}

TEST(prefix_index, a_removed_block_ends_the_match_there) {
  prefix_index index(test_block_size, 1000);
  index.apply_stored(0, make_stored({1, 2, 3}, std::nullopt, {100, 200, 300}));
  index.apply_removed(0, kv_removed{{2}});
  EXPECT_EQ(overlaps(index, {100, 200, 300}), (std::vector<std::uint32_t>{1}));
  EXPECT_EQ(index.total_blocks(), 2u);
  EXPECT_EQ(index.counters().removed_blocks, 1u);
}

TEST(prefix_index, removing_an_unknown_hash_is_counted_and_harmless) {
  prefix_index index(test_block_size, 1000);
  index.apply_stored(0, make_stored({1}, std::nullopt, {100}));
  index.apply_removed(0, kv_removed{{42}});
  index.apply_removed(3, kv_removed{{1}});
  EXPECT_EQ(index.counters().unknown_removed, 2u);
  EXPECT_EQ(overlaps(index, {100}), (std::vector<std::uint32_t>{1, 0, 0, 0}));
}

TEST(prefix_index, cleared_drops_one_workers_blocks_and_keeps_the_others) {
  prefix_index index(test_block_size, 1000);
  index.apply_stored(0, make_stored({1, 2}, std::nullopt, {100, 200}));
  index.apply_stored(1, make_stored({5, 6}, std::nullopt, {100, 200}));
  index.apply(0, kv_cleared{});
  EXPECT_EQ(overlaps(index, {100, 200}), (std::vector<std::uint32_t>{0, 2}));
  EXPECT_EQ(index.total_blocks(), 2u);
  EXPECT_EQ(index.worker_blocks(0), 0u);
  // The worker starts over from a clean slate: its old engine hashes are forgotten.
  EXPECT_FALSE(index.apply_stored(0, make_stored({3}, 2, {300})));
}

TEST(prefix_index, a_removed_worker_leaves_nothing_behind) {
  prefix_index index(test_block_size, 1000);
  index.apply_stored(2, make_stored({1, 2}, std::nullopt, {100, 200}));
  index.remove_worker(2);
  EXPECT_EQ(index.total_blocks(), 0u);
  EXPECT_EQ(index.entry_count(), 0u);
  EXPECT_EQ(overlaps(index, {100}), (std::vector<std::uint32_t>{0, 0, 0}));
}

TEST(prefix_index, the_size_bound_is_never_exceeded_and_evicts_entries_not_recently_used) {
  prefix_index index(test_block_size, 8);
  index.apply_stored(1, make_stored({5, 6, 7, 8}, std::nullopt, {50, 60, 70, 80}));
  index.apply_stored(0, make_stored({1, 2, 3, 4}, std::nullopt, {10, 20, 30, 40}));
  ASSERT_EQ(index.total_blocks(), 8u);
  // The first eviction sweeps the clock once, clearing every reference bit (and evicts the
  // oldest entry); then worker 0's prefix is matched, so it is referenced again and the
  // following evictions take worker 1's unreferenced blocks instead.
  std::vector<std::uint32_t> out;
  index.apply_stored(2, make_stored({9}, std::nullopt, {90}));
  EXPECT_EQ(index.total_blocks(), 8u);
  index.find_matches(request_hashes({10, 20, 30, 40}), out);
  for (std::uint64_t h = 100; h < 103; ++h) {
    index.apply_stored(2, make_stored({h}, std::nullopt, {static_cast<std::uint32_t>(h * 10)}));
    EXPECT_LE(index.total_blocks(), 8u);
  }
  EXPECT_EQ(overlaps(index, {10, 20, 30, 40})[0], 4u);
  EXPECT_EQ(overlaps(index, {50, 60, 70, 80})[1], 0u);
  EXPECT_GE(index.counters().evicted_entries, 4u);
}

TEST(prefix_index, a_bound_of_one_block_still_accepts_every_event) {
  prefix_index index(test_block_size, 1);
  for (std::uint64_t h = 1; h <= 50; ++h) {
    const auto worker = static_cast<worker_id>(h % 3);
    index.apply_stored(worker, make_stored({h}, std::nullopt, {static_cast<std::uint32_t>(h)}));
    ASSERT_EQ(index.total_blocks(), 1u);
    ASSERT_TRUE(index.contains(worker, request_hashes({static_cast<std::uint32_t>(h)})[0])) << "the newest block is the one kept";
  }
}

TEST(prefix_index, references_to_evicted_entries_are_swept_so_a_workers_map_stays_near_its_live_blocks) {
  // Evictions drop entries that worker 0 still names under its engine hashes; those stale
  // references must be swept, or the worker's map grows with every block it ever stored.
  prefix_index index(test_block_size, 64);
  for (std::uint64_t h = 1; h <= 20000; ++h)
    index.apply_stored(0, make_stored({h}, std::nullopt, {static_cast<std::uint32_t>(h)}));
  EXPECT_EQ(index.total_blocks(), 64u);
  // Live 64; the sweep lets stale ones reach 2 * live + 1024, so the map holds at most 4096
  // slots (16 bytes each) after 20 000 distinct engine hashes, not 32 768.
  EXPECT_LT(index.memory_bytes(), 96u * 1024u);
  EXPECT_TRUE(index.contains(0, request_hashes({20000})[0]));
  EXPECT_FALSE(index.contains(0, request_hashes({1})[0]));
}

TEST(prefix_index, predicted_blocks_expire_after_their_ttl_unless_refreshed) {
  prefix_index index(test_block_size, 1000, seconds(120));
  const time_point t0{};
  index.insert_predicted(0, request_hashes({100, 200}), t0);
  index.insert_predicted(1, request_hashes({100}), t0);
  EXPECT_EQ(overlaps(index, {100, 200}), (std::vector<std::uint32_t>{2, 1}));

  index.insert_predicted(0, request_hashes({100, 200}), t0 + seconds(100));  // refresh worker 0
  index.expire(t0 + seconds(119));
  EXPECT_EQ(overlaps(index, {100, 200}), (std::vector<std::uint32_t>{2, 1}));
  index.expire(t0 + seconds(120));
  EXPECT_EQ(overlaps(index, {100, 200}), (std::vector<std::uint32_t>{2, 0}));
  index.expire(t0 + seconds(220));
  EXPECT_EQ(overlaps(index, {100, 200}), (std::vector<std::uint32_t>{0, 0}));
  EXPECT_EQ(index.total_blocks(), 0u);
  EXPECT_EQ(index.counters().expired_blocks, 3u);
}

TEST(prefix_index, a_pair_a_kv_event_stored_never_expires_whether_predicted_before_or_after) {
  // In approximate mode the keys are sequence hashes; an engine whose block hashes are the
  // router's own puts a KV event on the same key. The event owns the pair: no TTL ends it.
  prefix_index index(test_block_size, 1000, seconds(120));
  const time_point t0{};
  const std::uint64_t first = request_hashes({100})[0];
  index.insert_predicted(0, request_hashes({100}), t0);
  index.apply_stored(0, make_stored({first}, std::nullopt, {100}));  // predicted, then stored
  index.apply_stored(1, make_stored({first}, std::nullopt, {100}));
  index.insert_predicted(1, request_hashes({100}), t0);  // stored, then predicted
  index.expire(t0 + seconds(1000));
  EXPECT_EQ(overlaps(index, {100}), (std::vector<std::uint32_t>{1, 1}));
  EXPECT_EQ(index.counters().expired_blocks, 0u);
}

TEST(prefix_index, a_predicted_pair_removed_or_cleared_before_its_ttl_is_not_expired_again) {
  prefix_index index(test_block_size, 1000, seconds(120));
  const time_point t0{};
  index.insert_predicted(0, request_hashes({100, 200}), t0);
  index.insert_predicted(1, request_hashes({100}), t0);
  index.apply_removed(0, kv_removed{{request_hashes({100, 200})[1]}});
  index.apply_cleared(1);
  index.insert_predicted(1, request_hashes({300}), t0 + seconds(60));  // predicted again after the clear
  EXPECT_EQ(index.total_blocks(), 2u);
  index.expire(t0 + seconds(120));
  EXPECT_EQ(index.total_blocks(), 1u) << "only worker 0's first block was still predicted";
  EXPECT_EQ(index.counters().expired_blocks, 1u);
  index.expire(t0 + seconds(180));
  EXPECT_EQ(index.total_blocks(), 0u);
  EXPECT_EQ(index.counters().expired_blocks, 2u);
}

TEST(prefix_index, prefetching_a_batch_changes_nothing_even_over_stale_unknown_and_hashed_parents) {
  // Two indexes see the same history with a bound of 3 pairs, so evictions leave stale
  // references behind; one of them is asked to prefetch every batch before applying it.
  prefix_index plain(test_block_size, 3), prefetched(test_block_size, 3);
  std::vector<std::vector<kv_event>> batches = {
      {make_stored({1}, std::nullopt, {10}), make_stored({2}, 1, {20}), make_stored({3}, 2, {30})},
      {make_stored({4}, 3, {40}), make_stored({5}, 1, {50}), make_stored({6}, 99, {60}), kv_removed{{2, 77}}},
      {make_stored({7}, std::nullopt, {10}), make_stored({8}, 7, {20}), kv_cleared{}, make_stored({9}, std::nullopt, {90})},
  };
  for (auto& events : batches) {
    // Half the stored events come hashed, as a decoder thread leaves them.
    for (std::size_t e = 0; e < events.size(); e += 2)
      if (auto* stored = std::get_if<kv_stored>(&events[e])) compute_stored_local_hashes(*stored, stored->local_hashes);
    prefetched.prefetch(0, events);
    for (const kv_event& event : events) {
      EXPECT_EQ(plain.apply(0, event), prefetched.apply(0, event));
    }
    EXPECT_EQ(plain.total_blocks(), prefetched.total_blocks());
    EXPECT_EQ(overlaps(plain, {10, 20, 30, 40}), overlaps(prefetched, {10, 20, 30, 40}));
    EXPECT_EQ(overlaps(plain, {90}), overlaps(prefetched, {90}));
  }
  EXPECT_EQ(prefetched.counters().unknown_parent, plain.counters().unknown_parent);
  EXPECT_GT(prefetched.counters().unknown_parent, 0u);
  EXPECT_GT(prefetched.counters().evicted_entries, 0u);
  EXPECT_TRUE(prefetched.contains(0, request_hashes({90})[0]));
}

TEST(prefix_index, image_hashes_on_an_event_match_the_request_side_image_hash) {
  prefix_index index(test_block_size, 1000);
  kv_stored event = make_stored({1, 2}, std::nullopt, {100, 200});
  event.images = {{.block = 1, .hash = 0xABCDEF}};
  index.apply_stored(0, event);

  const std::vector<std::uint32_t> tokens = tokens_of({100, 200});
  const image_span image{.token_offset = 5, .token_count = 2, .hash = 0xABCDEF};
  const image_span other{.token_offset = 5, .token_count = 2, .hash = 0x123};
  std::vector<std::uint64_t> local, sequence;
  std::vector<std::uint32_t> out;
  compute_local_hashes(tokens, test_block_size, std::span(&image, 1), {}, local);
  compute_sequence_hashes(local, sequence);
  index.find_matches(sequence, out);
  EXPECT_EQ(out[0], 2u);
  compute_local_hashes(tokens, test_block_size, std::span(&other, 1), {}, local);
  compute_sequence_hashes(local, sequence);
  index.find_matches(sequence, out);
  EXPECT_EQ(out[0], 1u) << "another image diverges at the block it covers";
}

TEST(prefix_index, workers_beyond_the_first_bitset_word_are_tracked) {
  prefix_index index(test_block_size, 10000);
  for (worker_id w = 0; w < 130; w += 43) index.apply_stored(w, make_stored({1}, std::nullopt, {100}));
  index.apply_stored(129, make_stored({7, 8}, std::nullopt, {100, 200}));
  const auto out = overlaps(index, {100, 200});
  ASSERT_EQ(out.size(), 130u);
  EXPECT_EQ(out[0], 1u);
  EXPECT_EQ(out[43], 1u);
  EXPECT_EQ(out[86], 1u);
  EXPECT_EQ(out[129], 2u);
  EXPECT_EQ(std::count(out.begin(), out.end(), 0u), 126);
}

}  // namespace
}  // namespace kvr
