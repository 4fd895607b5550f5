// The local block hashes a KV decoder thread computes for a stored event are the ones the
// request side computes for the same tokens, and an index given them ends as one that hashed
// the blocks itself.
#include "core/kv/stored_block_hashes.hpp"

#include <gtest/gtest.h>

#include "core/kv/block_hash.hpp"
#include "core/kv/kv_apply.hpp"
#include "tests/support/worker_blocks.hpp"

namespace kvr {
namespace {

constexpr std::uint32_t block = 4;

std::vector<std::uint32_t> tokens(std::uint32_t n, std::uint32_t first) {
  std::vector<std::uint32_t> out(n);
  for (std::uint32_t i = 0; i < n; ++i) out[i] = first + i * 7;
  return out;
}

kv_stored stored(std::vector<std::uint64_t> engine_hashes, std::vector<std::uint32_t> ids) {
  kv_stored event;
  event.block_hashes = std::move(engine_hashes);
  event.token_ids = std::move(ids);
  event.block_size = block;
  return event;
}

TEST(stored_block_hashes, equal_the_request_sides_local_hashes_with_lora_salt_and_images) {
  kv_stored event = stored({11, 12, 13}, tokens(12, 100));
  event.lora_name = "adapter-a";
  event.cache_salt = "tenant-7";
  // Listed out of block order, two on block 1 out of hash order.
  event.images.push_back({.block = 2, .hash = 0x77, .offset = 0, .identifier = "c"});
  event.images.push_back({.block = 1, .hash = 0xABCDEF, .offset = 2, .identifier = "b"});
  event.images.push_back({.block = 1, .hash = 0x12, .offset = 3, .identifier = "a"});

  std::vector<std::uint64_t> decoder_side;
  compute_stored_local_hashes(event, decoder_side);
  std::vector<std::uint64_t> request_side;
  const std::vector<image_span> images{{.token_offset = 6, .token_count = 1, .hash = 0xABCDEF},
                                       {.token_offset = 7, .token_count = 1, .hash = 0x12},
                                       {.token_offset = 8, .token_count = 1, .hash = 0x77}};
  compute_local_hashes(event.token_ids, block, images, {.lora_name = "adapter-a", .cache_salt = "tenant-7"}, request_side);
  EXPECT_EQ(decoder_side, request_side);
}

TEST(stored_block_hashes, leave_the_salt_out_of_an_event_that_continues_a_sequence) {
  kv_stored head = stored({11}, tokens(4, 100));
  head.cache_salt = "tenant-7";
  kv_stored continuation = stored({12}, tokens(4, 200));
  continuation.cache_salt = "tenant-7";
  continuation.parent_block_hash = 11;
  std::vector<std::uint64_t> with_parent, unsalted;
  compute_stored_local_hashes(continuation, with_parent);
  compute_local_hashes(continuation.token_ids, block, {}, {}, unsalted);
  EXPECT_EQ(with_parent, unsalted);
}

TEST(stored_block_hashes, are_empty_when_the_tokens_do_not_fill_the_blocks) {
  std::vector<std::uint64_t> out{1, 2};
  compute_stored_local_hashes(stored({11, 12}, tokens(7, 100)), out);
  EXPECT_TRUE(out.empty());
}

TEST(stored_block_hashes, precomputed_leave_an_index_as_one_that_hashed_the_blocks_itself) {
  kv_batch batch;
  kv_stored head = stored({11, 12}, tokens(8, 100));
  head.cache_salt = "s";
  kv_stored child = stored({13, 14}, tokens(8, 300));
  child.parent_block_hash = 12;
  child.images.push_back({.block = 0, .hash = 99, .offset = 0, .identifier = "i"});
  kv_stored other_tier = stored({21}, tokens(4, 500));
  other_tier.medium = "CPU";
  batch.events = {head, child, other_tier, kv_removed{{11}}};

  prefix_index hashing_itself(block, 1000), given_hashes(block, 1000);
  kv_event_counters counters;
  apply_batch(hashing_itself, 0, batch, counters);
  precompute_local_hashes(batch);
  EXPECT_EQ(std::get<kv_stored>(batch.events[0]).local_hashes.size(), 2u);
  EXPECT_EQ(std::get<kv_stored>(batch.events[1]).local_hashes.size(), 2u);
  EXPECT_TRUE(std::get<kv_stored>(batch.events[2]).local_hashes.empty()) << "other tiers are not indexed";
  apply_batch(given_hashes, 0, batch, counters);

  EXPECT_EQ(given_hashes.total_blocks(), 3u);
  EXPECT_EQ(sorted_worker_blocks(given_hashes, 0), sorted_worker_blocks(hashing_itself, 0));
}

TEST(stored_block_hashes, released_token_ids_leave_an_index_and_its_counters_as_the_tokens_would) {
  kv_batch batch;
  kv_stored head = stored({11, 12}, tokens(8, 100));
  kv_stored child = stored({13}, tokens(4, 300));
  child.parent_block_hash = 12;
  kv_stored partial = stored({14, 15}, tokens(6, 500));  // the tokens do not fill two blocks
  kv_stored other_tier = stored({21}, tokens(4, 700));
  other_tier.medium = "CPU";
  kv_stored wrong_size = stored({31}, tokens(8, 900));
  wrong_size.block_size = 8;  // not the index's block size
  batch.events = {head, child, partial, other_tier, wrong_size, kv_removed{{11}}};

  prefix_index with_tokens(block, 1000), released(block, 1000);
  kv_event_counters token_counters, released_counters;
  apply_batch(with_tokens, 0, batch, token_counters);
  precompute_local_hashes(batch);
  release_hashed_token_ids(batch);
  EXPECT_TRUE(std::get<kv_stored>(batch.events[0]).token_ids.empty());
  EXPECT_TRUE(std::get<kv_stored>(batch.events[1]).token_ids.empty());
  EXPECT_EQ(std::get<kv_stored>(batch.events[2]).token_ids.size(), 6u) << "not hashed, so kept";
  EXPECT_EQ(std::get<kv_stored>(batch.events[3]).token_ids.size(), 4u) << "other tiers are not hashed";
  EXPECT_TRUE(std::get<kv_stored>(batch.events[4]).token_ids.empty()) << "hashed at its own block size";
  apply_batch(released, 0, batch, released_counters);

  EXPECT_EQ(sorted_worker_blocks(released, 0), sorted_worker_blocks(with_tokens, 0));
  EXPECT_EQ(released.total_blocks(), 2u) << "block 12 and its child 13; 11 removed";
  EXPECT_EQ(released_counters.partial_blocks, 1u);
  EXPECT_EQ(released_counters.partial_blocks, token_counters.partial_blocks);
  EXPECT_EQ(released_counters.other_tier_events, token_counters.other_tier_events);
  EXPECT_EQ(released_counters.dropped_stored, token_counters.dropped_stored);
  EXPECT_EQ(released.counters().malformed_stored, 1u) << "the event of another block size";
  EXPECT_EQ(released.counters().malformed_stored, with_tokens.counters().malformed_stored);
}

}  // namespace
}  // namespace kvr
