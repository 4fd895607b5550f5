// A hybrid model's KV-cache groups: what each group's events do to the index, and the prefix a
// worker can really serve, as vLLM's hybrid coordinator finds it.
#include "core/routing/kv_groups.hpp"

#include <gtest/gtest.h>

#include <random>

#include "core/kv/block_hash.hpp"
#include "core/kv/kv_apply.hpp"
#include "core/routing/prefix_index.hpp"
#include "tests/support/block_prompts.hpp"
#include "tests/support/worker_blocks.hpp"

namespace kvr {
namespace {

constexpr std::uint32_t block = 4;

std::vector<std::uint32_t> tokens_of_blocks(std::uint32_t first, std::uint32_t count) {
  return kvr::tokens_of_blocks(first, count, block, 1000);
}
std::vector<std::uint64_t> prompt(std::uint32_t blocks) { return prompt_hashes(blocks, block, 1000); }

/// vLLM's store of the prompt's blocks [first, first + count) in one group: engine hash of block
/// i is i + 1 in every group of the index's block size (vLLM strips the group from the hash).
kv_stored store(std::uint32_t first, std::uint32_t count, std::int64_t group, std::string kind,
                std::optional<std::int64_t> window = std::nullopt) {
  kv_stored event;
  for (std::uint32_t b = first; b < first + count; ++b) event.block_hashes.push_back(b + 1);
  if (first > 0) event.parent_block_hash = first;
  event.token_ids = tokens_of_blocks(first, count);
  event.block_size = block;
  event.group_idx = group;
  event.kv_cache_spec_kind = std::move(kind);
  event.sliding_window = window;
  return event;
}

kv_removed removal(std::vector<std::uint32_t> blocks, std::int64_t group) {
  kv_removed event;
  for (std::uint32_t b : blocks) event.block_hashes.push_back(b + 1);
  event.group_idx = group;
  return event;
}

/// One worker's set: the index, the groups, and what a prompt's usable prefix is on it.
struct hybrid_set {
  prefix_index index{block, 10000};
  kv_groups groups{block, 10000};
  kv_event_counters counters;

  void apply(kv_event event) {
    kv_batch batch;
    batch.events.push_back(std::move(event));
    apply_batch(index, 0, batch, counters, &groups);
  }
  std::uint32_t usable(std::uint32_t prompt_blocks) {
    const auto hashes = prompt(prompt_blocks);
    std::vector<std::uint32_t> overlaps;
    index.find_matches(hashes, overlaps);
    groups.limit_overlaps(hashes, overlaps);
    return overlaps.empty() ? 0 : overlaps[0];
  }
};

TEST(kv_groups, a_sliding_window_group_dropping_blocks_out_of_its_window_leaves_the_full_attention_chain_whole) {
  // Full attention in group 0, a window of 8 tokens (2 blocks) in group 1. The window group
  // frees what falls out of its window; before, those removals cut the one chain at block 0.
  hybrid_set set;
  set.apply(store(0, 6, 0, "full_attention"));
  set.apply(store(0, 6, 1, "sliding_window", 8));
  set.apply(removal({0, 1, 2}, 1));
  EXPECT_EQ(set.index.worker_blocks(0), 6u) << "the chain keeps every block";
  EXPECT_EQ(set.usable(6), 6u) << "blocks 4 and 5 serve the window before the end";
  set.apply(removal({5}, 1));
  EXPECT_EQ(set.usable(6), 5u) << "the window's last run, blocks 3 and 4, ends at 5";
  set.apply(removal({4}, 1));
  EXPECT_EQ(set.usable(6), 0u) << "no two blocks in a row, and block 0 is gone: nothing";
}

TEST(kv_groups, a_sliding_window_group_serves_its_leading_run_when_no_run_is_as_long_as_the_window) {
  hybrid_set set;
  set.apply(store(0, 8, 0, "full_attention"));
  set.apply(store(0, 8, 1, "sliding_window", 4 * block + 1));  // 4 blocks needed
  set.apply(removal({2, 5}, 1));
  EXPECT_EQ(set.usable(8), 2u) << "blocks 0 and 1, from the start";
}

TEST(kv_groups, a_mamba_group_serves_up_to_its_last_state_at_or_before_the_match) {
  hybrid_set set;
  set.apply(store(0, 6, 0, "full_attention"));
  // States at the end of blocks 2 and 5 only (mamba keeps few); the event of block 5 names
  // block 4, which the chain holds.
  set.apply(store(2, 1, 1, "mamba"));
  set.apply(store(5, 1, 1, "mamba"));
  EXPECT_EQ(set.usable(6), 6u);
  EXPECT_EQ(set.usable(5), 3u) << "the prompt ends within block 5's chunk: the state after block 2";
  set.apply(removal({2}, 1));
  EXPECT_EQ(set.usable(5), 0u);
}

TEST(kv_groups, a_mamba_group_of_larger_blocks_keys_each_state_by_the_chain_at_its_end) {
  // Mamba blocks of two of the index's: one hash per chunk of 8 tokens, hashed here at 4.
  hybrid_set set;
  set.apply(store(0, 6, 0, "full_attention"));
  kv_stored chunk;
  chunk.block_hashes = {7001, 7002};
  chunk.token_ids = tokens_of_blocks(0, 4);
  chunk.block_size = 2 * block;
  chunk.group_idx = 1;
  chunk.kv_cache_spec_kind = "mamba";
  set.apply(chunk);
  EXPECT_EQ(set.usable(6), 4u) << "the state after the second chunk, 4 of the index's blocks";
  EXPECT_EQ(set.usable(3), 2u);
  kv_removed gone;
  gone.block_hashes = {7002};
  gone.group_idx = 1;
  set.apply(gone);
  EXPECT_EQ(set.usable(6), 2u);
}

TEST(kv_groups, every_group_is_asked_again_until_none_shortens_the_prefix) {
  // Mamba cuts 8 to 5 (its state after block 4); the window (2 blocks) then needs blocks 3 and
  // 4, which it dropped: its last run before 5 is blocks 1 and 2, so 3; mamba has no state
  // after block 2 but after block 1: 2; and the window holds blocks 0 and 1 before 2.
  hybrid_set set;
  set.apply(store(0, 8, 0, "full_attention"));
  set.apply(store(0, 8, 1, "sliding_window", 8));
  set.apply(store(1, 1, 2, "mamba"));
  set.apply(store(4, 1, 2, "mamba"));
  set.apply(removal({3, 4}, 1));
  EXPECT_EQ(set.usable(8), 2u);
}

TEST(kv_groups, a_kind_this_router_does_not_know_is_counted_and_never_enters_a_chain) {
  hybrid_set set;
  set.apply(store(0, 4, 0, "full_attention"));
  set.apply(store(0, 6, 3, "chunked_local_attention"));
  set.apply(removal({0}, 3));
  set.apply(removal({1}, 7));  // a group never seen stored: nothing of it is in the chain
  EXPECT_EQ(set.counters.unknown_group_kind_events, 1u);
  EXPECT_EQ(set.index.worker_blocks(0), 4u) << "its store added nothing and its removal took nothing";
  EXPECT_EQ(set.usable(6), 4u) << "and it does not limit the prefix";
}

TEST(kv_groups, events_without_groups_and_removals_of_full_attention_groups_are_the_chains_as_before) {
  hybrid_set set;
  kv_stored plain = store(0, 4, 0, "");
  plain.group_idx.reset();
  set.apply(plain);
  set.apply(store(0, 4, 2, "full_attention"));
  EXPECT_EQ(set.usable(4), 4u);
  set.apply(removal({3}, 2));  // a full-attention group: every one is needed, the chain loses it
  EXPECT_EQ(set.usable(4), 3u);
  kv_removed ungrouped;
  ungrouped.block_hashes = {3};
  set.apply(ungrouped);
  EXPECT_EQ(set.usable(4), 2u);
  EXPECT_TRUE(set.groups.empty());
}

TEST(kv_groups, a_clear_empties_every_group_of_the_worker) {
  hybrid_set set;
  set.apply(store(0, 4, 0, "full_attention"));
  set.apply(store(3, 1, 1, "mamba"));
  set.apply(kv_cleared{});
  set.apply(store(0, 4, 0, "full_attention"));
  EXPECT_EQ(set.usable(4), 0u) << "the state after block 3 went with the clear";
  EXPECT_EQ(set.groups.groups().front().blocks, 0u);
}

TEST(kv_groups, no_groups_stores_or_removals_ever_change_the_full_attention_chain) {
  // Random interleavings of full-attention, window and mamba events for three workers: the
  // chain ends exactly as the full-attention events alone leave it.
  std::mt19937 rng(43);
  for (int round = 0; round < 50; ++round) {
    prefix_index with_groups(block, 100000), chain_alone(block, 100000);
    kv_groups groups(block, 100000);
    kv_event_counters counters, alone_counters;
    for (int step = 0; step < 300; ++step) {
      const worker_id worker = rng() % 3;
      const std::uint32_t first = rng() % 12;
      const std::uint32_t count = 1 + rng() % 4;
      const int what = static_cast<int>(rng() % 6);
      kv_batch batch;
      const bool full = what == 0 || what == 3;
      const std::int64_t group = full ? 0 : what == 4 ? 1 + static_cast<std::int64_t>(rng() % 2) : what;
      const char* kind = full ? "full_attention" : group == 1 ? "sliding_window" : "mamba";
      if (what < 3) batch.events.emplace_back(store(first, count, group, kind, 8));
      else if (what < 5) batch.events.emplace_back(removal({first, first + 1}, group));
      else batch.events.emplace_back(kv_cleared{});
      apply_batch(with_groups, worker, batch, counters, &groups);
      if (full || what == 5) apply_batch(chain_alone, worker, batch, alone_counters);
    }
    for (worker_id w = 0; w < 3; ++w)
      ASSERT_EQ(sorted_worker_blocks(with_groups, w), sorted_worker_blocks(chain_alone, w)) << "round " << round;
  }
}

TEST(kv_groups, an_engine_naming_more_groups_than_any_model_has_gets_the_rest_counted_and_kept_out) {
  hybrid_set set;
  set.apply(store(0, 4, 0, "full_attention"));
  for (std::int64_t g = 1; g <= 200; ++g) set.apply(store(0, 4, g, "mamba"));
  EXPECT_LE(set.groups.groups().size(), kv_groups::max_groups);
  EXPECT_GT(set.groups.counters().unknown_kind_events, 0u);
  EXPECT_EQ(set.index.worker_blocks(0), 4u);
}

}  // namespace
}  // namespace kvr
