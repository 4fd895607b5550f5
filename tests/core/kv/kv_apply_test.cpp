// Applying a batch: the scorer prefetches and applies long batches a group of events at a time,
// and the index ends exactly as if each event had been applied on its own, in order.
#include "core/kv/kv_apply.hpp"

#include <gtest/gtest.h>

#include "tests/support/worker_blocks.hpp"

namespace kvr {
namespace {

constexpr std::uint32_t block = 4;

kv_stored stored(std::uint64_t engine_hash, std::optional<std::uint64_t> parent) {
  kv_stored event;
  event.block_hashes = {engine_hash};
  event.parent_block_hash = parent;
  event.block_size = block;
  for (std::uint32_t t = 0; t < block; ++t) event.token_ids.push_back(static_cast<std::uint32_t>(engine_hash * 10 + t));
  return event;
}

TEST(kv_apply, a_batch_longer_than_a_prefetch_group_ends_as_its_events_applied_one_by_one) {
  // A chain of one-block events crossing every group boundary, with a removal of blocks the
  // batch itself stored, an unknown parent, a clear and a chain started again after it.
  kv_batch batch;
  for (std::uint64_t h = 1; h <= 40; ++h) {
    batch.events.emplace_back(stored(h, h == 1 ? std::nullopt : std::optional<std::uint64_t>(h - 1)));
    if (h == 20) batch.events.emplace_back(kv_removed{{3, 5, 18}});
    if (h == 30) batch.events.emplace_back(stored(900, 777));  // parent never stored
  }
  batch.events.emplace_back(kv_cleared{});
  for (std::uint64_t h = 101; h <= 110; ++h)
    batch.events.emplace_back(stored(h, h == 101 ? std::nullopt : std::optional<std::uint64_t>(h - 1)));
  batch.events.emplace_back(kv_removed{{105}});
  ASSERT_GT(batch.events.size(), 3u * 16u);

  prefix_index as_batch(block, 1000), one_by_one(block, 1000);
  kv_event_counters counters;
  apply_batch(as_batch, 0, batch, counters);
  for (const kv_event& event : batch.events) one_by_one.apply(0, event);

  EXPECT_EQ(sorted_worker_blocks(as_batch, 0), sorted_worker_blocks(one_by_one, 0));
  EXPECT_EQ(as_batch.total_blocks(), 9u) << "the chain after the clear, less one removed block";
  EXPECT_EQ(as_batch.counters().unknown_parent, one_by_one.counters().unknown_parent);
  EXPECT_EQ(as_batch.counters().unknown_parent, 1u);
  EXPECT_EQ(as_batch.counters().removed_blocks, one_by_one.counters().removed_blocks);
  EXPECT_EQ(as_batch.counters().cleared, 1u);
  EXPECT_EQ(counters.stored_events, 51u);
  EXPECT_EQ(counters.removed_events, 2u);
  EXPECT_EQ(counters.cleared_events, 1u);
  EXPECT_EQ(counters.dropped_stored, 1u) << "the event whose parent was never stored";
}

}  // namespace
}  // namespace kvr
