#include "core/mocker/paged_cache.hpp"

#include <numeric>

#include <gtest/gtest.h>

#include "core/kv/block_hash.hpp"

namespace kvr::mocker {
namespace {

std::vector<std::uint32_t> tokens(std::uint32_t first, std::size_t count) {
  std::vector<std::uint32_t> t(count);
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::vector<std::uint64_t> removed_hashes(const std::vector<kv_event>& events) {
  std::vector<std::uint64_t> out;
  for (const kv_event& e : events)
    if (const auto* r = std::get_if<kv_removed>(&e)) out.insert(out.end(), r->block_hashes.begin(), r->block_hashes.end());
  return out;
}

TEST(paged_cache, a_shared_prefix_is_reused_and_only_new_blocks_are_stored_after_their_parent) {
  paged_cache cache(64, 4);
  std::vector<kv_event> events;
  const auto a = tokens(0, 16);
  auto first = cache.allocate(a, 4, events);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->reused_blocks, 0u);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(std::get<kv_stored>(events[0]).block_hashes.size(), 4u);
  EXPECT_FALSE(std::get<kv_stored>(events[0]).parent_block_hash.has_value());

  auto b = tokens(0, 12);
  const auto tail = tokens(100, 6);
  b.insert(b.end(), tail.begin(), tail.end());  // 3 shared blocks, 1 new full block, 2 tokens over
  events.clear();
  auto second = cache.allocate(b, 4, events);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->reused_blocks, 3u);
  EXPECT_EQ(second->private_blocks, 2u);  // the partial block and the decode room
  ASSERT_EQ(events.size(), 1u);
  const auto& stored = std::get<kv_stored>(events[0]);
  EXPECT_EQ(stored.parent_block_hash, cache.engine_hashes(a)[2]);
  EXPECT_EQ(stored.token_ids, (std::vector<std::uint32_t>{100, 101, 102, 103}));
}

TEST(paged_cache, a_finished_sequence_is_evicted_suffix_first_and_running_ones_never) {
  paged_cache cache(6, 4);
  std::vector<kv_event> events;
  const auto a = tokens(0, 16);  // 4 blocks, no decode room
  auto held = cache.allocate(a, 0, events);
  ASSERT_TRUE(held);
  events.clear();
  EXPECT_FALSE(cache.allocate(tokens(500, 16), 0, events)) << "only 2 free blocks while a runs";
  EXPECT_TRUE(events.empty());
  cache.release(*held);
  auto other = cache.allocate(tokens(500, 16), 0, events);  // needs 2 of a's 4 blocks
  ASSERT_TRUE(other);
  const auto a_hashes = cache.engine_hashes(a);
  EXPECT_EQ(removed_hashes(events), (std::vector<std::uint64_t>{a_hashes[3], a_hashes[2]}));
  EXPECT_EQ(cache.cached_prefix(a_hashes), 2u) << "a's prefix outlives its suffix";
}

TEST(paged_cache, the_dump_carries_the_sequence_hashes_the_router_computes_from_the_tokens) {
  paged_cache cache(16, 4);
  std::vector<kv_event> events;
  const auto a = tokens(7, 12);
  ASSERT_TRUE(cache.allocate(a, 0, events));
  std::vector<std::uint64_t> local, sequence;
  compute_local_hashes(a, 4, {}, {}, local);
  compute_sequence_hashes(local, sequence);
  std::vector<std::uint64_t> dumped;
  for (const cached_block& b : cache.dump()) dumped.push_back(b.router_sequence_hash);
  std::sort(dumped.begin(), dumped.end());
  std::sort(sequence.begin(), sequence.end());
  EXPECT_EQ(dumped, sequence);
  EXPECT_DOUBLE_EQ(cache.usage(), 3.0 / 16);
}

TEST(paged_cache, an_image_changes_the_blocks_it_covers_and_is_reported_in_extra_keys) {
  paged_cache cache(64, 4);
  const auto prompt = tokens(0, 12);
  const std::vector<image_span> image_a = {{.token_offset = 6, .token_count = 3, .hash = 0xa}};
  const std::vector<image_span> image_b = {{.token_offset = 6, .token_count = 3, .hash = 0xb}};
  const auto a = cache.engine_hashes(prompt, image_a), b = cache.engine_hashes(prompt, image_b);
  EXPECT_EQ(a[0], b[0]) << "block 0 holds no image";
  EXPECT_NE(a[1], b[1]);
  EXPECT_NE(a[2], b[2]) << "and the chain carries the difference on";
  std::vector<kv_event> events;
  ASSERT_TRUE(cache.allocate(prompt, 0, events, image_a));
  const auto& stored = std::get<kv_stored>(events.at(0));
  ASSERT_EQ(stored.images.size(), 2u);  // the run 6..8 covers blocks 1 and 2
  EXPECT_EQ(stored.images[0].block, 1u);
  EXPECT_EQ(stored.images[0].offset, 2);
  EXPECT_EQ(stored.images[1].offset, -2);
  EXPECT_EQ(stored.images[0].identifier, "000000000000000a" + std::string(48, '0'));
  std::vector<std::uint64_t> local, sequence, dumped;
  compute_local_hashes(prompt, 4, image_a, {}, local);
  compute_sequence_hashes(local, sequence);
  for (const cached_block& block : cache.dump()) dumped.push_back(block.router_sequence_hash);
  std::sort(dumped.begin(), dumped.end());
  std::sort(sequence.begin(), sequence.end());
  EXPECT_EQ(dumped, sequence);
}

TEST(paged_cache, a_hybrid_engine_reuses_what_every_group_serves_and_publishes_each_group) {
  // Blocks of 4, a window of 8 tokens (2 blocks), mamba states at each prompt's end.
  paged_cache cache(1000, 4, {.sliding_window_tokens = 8, .mamba = true});
  std::vector<kv_event> events;
  const auto first = tokens(0, 24);  // 6 blocks
  auto a = cache.allocate(first, 1, events);
  ASSERT_TRUE(a);
  int window_drops = 0, mamba_stores = 0;
  for (const kv_event& e : events) {
    if (const auto* r = std::get_if<kv_removed>(&e); r && r->group_idx == 1) window_drops += static_cast<int>(r->block_hashes.size());
    if (const auto* s = std::get_if<kv_stored>(&e); s && s->kv_cache_spec_kind == "mamba") ++mamba_stores;
  }
  EXPECT_EQ(window_drops, 4) << "blocks 0-3 fall out of the window at the prompt's end";
  EXPECT_EQ(mamba_stores, 1);
  cache.release(*a);

  // The next turn (the whole prompt and more) reuses all 6 blocks: the window's last two and
  // the state after block 5 are there.
  auto next_turn = first;
  next_turn.insert(next_turn.end(), {900, 901, 902, 903, 904});
  events.clear();
  auto b = cache.allocate(next_turn, 1, events);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->reused_blocks, 6u);
  cache.release(*b);

  // A branch after block 3: full attention has blocks 0-3, but no state ends there and the
  // window dropped them: nothing is reused.
  auto branch = tokens(0, 16);
  branch.insert(branch.end(), {800, 801, 802, 803, 804});
  EXPECT_EQ(cache.cached_prefix(cache.engine_hashes(branch)), 4u) << "full attention alone would serve 4";
  events.clear();
  auto c = cache.allocate(branch, 1, events);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->reused_blocks, 0u);
}

TEST(paged_cache, evicted_blocks_go_to_the_host_tier_and_a_prompt_loads_them_back_instead_of_computing_them) {
  paged_cache cache(4, 4, {}, {.cpu_blocks = 3});
  std::vector<kv_event> events;
  const auto a = tokens(0, 12);  // 3 blocks
  auto first = cache.allocate(a, 1, events);
  ASSERT_TRUE(first);
  cache.release(*first);
  events.clear();
  auto other = cache.allocate(tokens(100, 16), 0, events);  // 4 blocks: A's three are evicted
  ASSERT_TRUE(other);
  int host_stores = 0;
  for (const kv_event& e : events)
    if (const auto* st = std::get_if<kv_stored>(&e); st && st->medium == "CPU") {
      ++host_stores;
      EXPECT_EQ(st->token_ids.size(), 4u) << "an offloaded copy carries its block's tokens";
    }
  EXPECT_EQ(host_stores, 3);
  cache.release(*other);
  events.clear();
  auto again = cache.allocate(a, 1, events);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->reused_blocks, 0u);
  EXPECT_EQ(again->loaded_blocks, 3u) << "A's blocks come back from the host tier";
}

}  // namespace
}  // namespace kvr::mocker
