// Blocks on tiers below the GPU: what each tier's events do, and what the cost credits for them.
#include "core/routing/kv_tiers.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/kv/block_hash.hpp"
#include "core/kv/kv_apply.hpp"
#include "core/routing/prefix_index.hpp"
#include "core/routing/selector/cost.hpp"
#include "tests/support/block_prompts.hpp"
#include "tests/support/worker_blocks.hpp"

namespace kvr {
namespace {

constexpr std::uint32_t block = 4;
const time_point t0{};

std::vector<std::uint32_t> tokens_of_blocks(std::uint32_t first, std::uint32_t count) {
  return kvr::tokens_of_blocks(first, count, block, 500);
}
std::vector<std::uint64_t> prompt(std::uint32_t blocks) { return prompt_hashes(blocks, block, 500); }

kv_stored store(std::uint32_t first, std::uint32_t count, std::string medium) {
  kv_stored event;
  for (std::uint32_t b = first; b < first + count; ++b) event.block_hashes.push_back(b + 1);
  if (first > 0) event.parent_block_hash = first;
  event.token_ids = tokens_of_blocks(first, count);
  event.block_size = block;
  event.medium = std::move(medium);
  return event;
}

kv_removed removal(std::vector<std::uint32_t> blocks, std::string medium) {
  kv_removed event;
  for (std::uint32_t b : blocks) event.block_hashes.push_back(b + 1);
  event.medium = std::move(medium);
  return event;
}

struct tiered_set {
  prefix_index index{block, 10000};
  kv_tiers tiers{block, 10000, std::chrono::seconds(60)};
  kv_event_counters counters;
  void apply(kv_event event, time_point now = t0) {
    kv_batch batch;
    batch.events.push_back(std::move(event));
    apply_batch(index, 0, batch, counters, nullptr, &tiers, now);
  }
  double credit(std::uint32_t prompt_blocks, kv_tier_weights weights = {}) {
    const auto hashes = prompt(prompt_blocks);
    std::vector<std::uint32_t> overlaps;
    index.find_matches(hashes, overlaps);
    return tiers.credit(0, hashes, overlaps.empty() ? 0 : overlaps[0], weights);
  }
};

TEST(kv_tiers, every_spelling_the_engines_send_names_its_tier) {
  EXPECT_EQ(kv_tier_of(""), kv_tier::gpu);
  EXPECT_EQ(kv_tier_of("GPU"), kv_tier::gpu);
  for (const char* host : {"CPU", "cpu", "CPU_PINNED", "HOST"}) EXPECT_EQ(kv_tier_of(host), kv_tier::host) << host;
  for (const char* disk : {"STORAGE", "DISK", "disk", "SSD"}) EXPECT_EQ(kv_tier_of(disk), kv_tier::disk) << disk;
  for (const char* external : {"EXTERNAL", "REMOTE"}) EXPECT_EQ(kv_tier_of(external), kv_tier::external) << external;
  EXPECT_EQ(kv_tier_of("TAPE"), kv_tier::unknown);
}

TEST(kv_tiers, blocks_offloaded_past_the_gpu_chain_are_credited_at_their_tiers_weight_and_the_best_tier_counts) {
  tiered_set set;
  set.apply(store(0, 2, "GPU"));
  set.apply(store(2, 2, "CPU"));      // vLLM's OffloadingConnector: blocks 2-3 on the host
  set.apply(store(4, 1, "STORAGE"));  // block 4 on disk
  EXPECT_EQ(set.index.worker_blocks(0), 2u) << "lower tiers never enter the GPU chain";
  EXPECT_DOUBLE_EQ(set.credit(6), 0.75 + 0.75 + 0.25);
  set.apply(store(4, 1, "CPU_PINNED"));  // and on the host too: the host's weight
  EXPECT_DOUBLE_EQ(set.credit(6), 3 * 0.75);
  EXPECT_DOUBLE_EQ(set.credit(6, {.host = 0.5}), 1.5);
  set.apply(removal({3}, "CPU"));
  EXPECT_DOUBLE_EQ(set.credit(6), 0.75) << "the run past the GPU stops at the first block on no tier";
}

TEST(kv_tiers, a_tier_that_never_sends_removals_forgets_its_blocks_after_the_ttl_one_that_does_keeps_them) {
  tiered_set set;
  set.apply(store(0, 1, "GPU"));
  set.apply(store(1, 2, "CPU"), t0 + std::chrono::seconds(1));  // LMCache: stores only
  set.tiers.expire(t0 + std::chrono::seconds(30));
  EXPECT_DOUBLE_EQ(set.credit(3), 1.5);
  set.tiers.expire(t0 + std::chrono::seconds(62));
  EXPECT_DOUBLE_EQ(set.credit(3), 0.0);
  EXPECT_EQ(set.tiers.counters().aged_out, 2u);

  set.apply(store(1, 1, "EXTERNAL"), t0 + std::chrono::seconds(63));
  set.tiers.set_ttl(std::chrono::seconds(5));  // retuned: the next expire uses it
  set.tiers.expire(t0 + std::chrono::seconds(69));
  EXPECT_DOUBLE_EQ(set.credit(3), 0.0);

  set.apply(store(1, 2, "DISK"), t0 + std::chrono::seconds(70));
  set.apply(removal({9}, "DISK"), t0 + std::chrono::seconds(70));  // this tier sends removals
  set.tiers.expire(t0 + std::chrono::seconds(200));
  EXPECT_DOUBLE_EQ(set.credit(3), 0.5) << "a tier that sends removals keeps its blocks past the TTL";
}

TEST(kv_tiers, each_tier_holds_at_most_its_bound_the_oldest_stored_going_first) {
  prefix_index index(block, 100);
  kv_tiers tiers(block, 3, duration::zero());
  kv_event_counters counters;
  kv_batch batch;
  batch.events.emplace_back(store(0, 5, "CPU"));
  apply_batch(index, 0, batch, counters, nullptr, &tiers, t0);
  EXPECT_EQ(tiers.blocks(kv_tier::host), 3u);
  EXPECT_EQ(tiers.counters().pushed_out, 2u);
  EXPECT_EQ(tiers.lower_tier_run(0, prompt(5), 0), 0u) << "blocks 0 and 1 went first: the run from 0 is broken";
}

TEST(kv_tiers, an_unknown_medium_is_counted_and_kept_out_of_every_tier_and_the_gpu_chain) {
  tiered_set set;
  set.apply(store(0, 3, "TAPE"));
  EXPECT_EQ(set.tiers.counters().unknown_tier_events, 1u);
  EXPECT_EQ(set.index.total_blocks(), 0u);
  EXPECT_DOUBLE_EQ(set.credit(3), 0.0);
}

TEST(kv_tiers, the_cost_prefers_a_worker_whose_host_tier_holds_the_prompt_to_one_that_holds_nothing) {
  const cost_params params{.prompt_tokens = 64, .block_size = 4};
  const worker_candidate offloaded{.worker = 0, .lower_tier_blocks = 16 * 0.75};
  const worker_candidate cold{.worker = 1};
  const worker_candidate on_gpu{.worker = 2, .overlap_blocks = 16};
  EXPECT_LT(kv_cost(offloaded, params), kv_cost(cold, params));
  EXPECT_LT(kv_cost(on_gpu, params), kv_cost(offloaded, params));
}

TEST(kv_tiers, tier_weights_are_read_as_the_command_line_and_cards_spell_them) {
  const auto weights = parse_tier_weights("host=0.5,disk=0.1");
  ASSERT_TRUE(weights);
  EXPECT_EQ(*weights, (kv_tier_weights{.gpu = 1.0, .host = 0.5, .disk = 0.1, .external = 0.5}));
  EXPECT_EQ(parse_tier_weights("tape=1").error(), "unknown tier \"tape\" (expected gpu, host, disk or external)");
  EXPECT_EQ(parse_tier_weights("host=1.5").error(), "the weight of host must be a number in [0, 1] (got \"1.5\")");
  EXPECT_FALSE(parse_tier_weights("host"));
  router_config config;
  ASSERT_TRUE(set_knob(config, "tier_weights", "external=0"));
  EXPECT_EQ(config.tier_weights.external, 0.0);
  auto from_card = router_config_from_json(nlohmann::json::parse(R"({"tier_weights": {"host": 0.6}})"));
  ASSERT_TRUE(from_card);
  EXPECT_EQ(from_card->tier_weights.host, 0.6);
  EXPECT_EQ(to_json(*from_card)["tier_weights"], "gpu=1,host=0.6,disk=0.25,external=0.5");
}

}  // namespace
}  // namespace kvr
