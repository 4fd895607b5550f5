/// A disaggregated set's pair choice: prefill by cached prefix over the prefill pool, decode by
/// load over the decode pool, and both legs' bookings.
#include <gtest/gtest.h>

#include "core/routing/worker_set_router.hpp"
#include "tests/core/routing/prefix_index_fixtures.hpp"

namespace kvr {
namespace {

using namespace std::chrono_literals;
using testing::make_stored;
using testing::request_hashes;
using testing::stored_batch;
using testing::test_block_size;

const time_point t0{};

/// Workers p0, p1 (prefill) and d0, d1 (decode), in that order.
worker_set_router_settings pd_set(disaggregation_card card = {}) {
  worker_set_router_settings settings;
  settings.config.block_size = test_block_size;
  settings.worker_names = {"p0", "p1", "d0", "d1"};
  settings.worker_roles = {worker_role::prefill, worker_role::prefill, worker_role::decode, worker_role::decode};
  settings.disaggregation = card;
  settings.max_request_age = 1h;
  return settings;
}

route_query pair_query(std::uint64_t id, const std::vector<std::uint64_t>& hashes, bool disaggregate = true) {
  return {.request_id = id,
          .sequence_hashes = hashes,
          .prompt_tokens = static_cast<std::uint32_t>(hashes.size() * test_block_size),
          .disaggregate = disaggregate};
}

TEST(worker_set_router_pd, the_prefill_worker_is_the_one_caching_the_prompt_and_the_decode_worker_the_least_loaded) {
  worker_set_router router(pd_set());
  router.on_kv_batch(1, false, stored_batch({10, 20, 30}), t0);  // p1 caches the prompt
  router.on_kv_batch(2, false, stored_batch({10, 20, 30}), t0);  // so does d0, which is ignored: credit 0
  const auto hashes = request_hashes({10, 20, 30, 40});
  const route_decision first = router.decide(pair_query(1, hashes), t0);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first.prefill_worker);
  EXPECT_EQ(*first.prefill_worker, 1u);
  EXPECT_EQ(first.prefill_overlap_blocks, 3u);
  EXPECT_TRUE(first.worker == 2u || first.worker == 3u);
  // The decode leg's blocks now load its worker: the next decode leg goes to the other one.
  const route_decision second = router.decide(pair_query(2, hashes), t0);
  ASSERT_TRUE(second.ok());
  EXPECT_NE(second.worker, first.worker);
  EXPECT_EQ(*second.prefill_worker, 1u);
}

TEST(worker_set_router_pd, both_legs_are_booked_the_prefill_one_with_its_work_and_released_apart) {
  worker_set_router router(pd_set());
  const auto hashes = request_hashes({1, 2, 3, 4});
  const route_decision decision = router.decide(pair_query(7, hashes), t0);
  ASSERT_TRUE(decision.ok() && decision.prefill_worker);
  const worker_load prefill = router.loads().load(*decision.prefill_worker);
  const worker_load decode = router.loads().load(decision.worker);
  EXPECT_EQ(prefill.prefill_tokens, 4 * test_block_size);
  EXPECT_EQ(prefill.requests, 1u);
  EXPECT_EQ(decode.prefill_tokens, 0u) << "the decode worker pulls the KV: no prefill work";
  EXPECT_EQ(decode.decode_blocks, 4u);
  router.on_lifecycle({lifecycle_event::kind::finished, prefill_leg_id(7), *decision.prefill_worker, 0}, t0);
  EXPECT_EQ(router.loads().load(*decision.prefill_worker).requests, 0u);
  EXPECT_EQ(router.loads().load(decision.worker).requests, 1u) << "the decode leg runs on";
  router.on_lifecycle({lifecycle_event::kind::finished, 7, decision.worker, 0}, t0);
  for (std::uint32_t w = 0; w < 4; ++w) EXPECT_EQ(router.loads().load(w), worker_load{}) << w;
}

TEST(worker_set_router_pd, a_request_not_disaggregated_runs_on_the_decode_pool) {
  worker_set_router router(pd_set());
  router.on_kv_batch(0, false, stored_batch({10, 20}), t0);  // a prefill worker caches it: not eligible
  for (std::uint64_t id = 1; id <= 6; ++id) {
    const route_decision decision = router.decide(pair_query(id, request_hashes({10, 20}), false), t0);
    ASSERT_TRUE(decision.ok());
    EXPECT_FALSE(decision.prefill_worker);
    EXPECT_GE(decision.worker, 2u);
  }
}

TEST(worker_set_router_pd, a_decode_credit_prefers_the_decode_worker_caching_the_prompt) {
  worker_set_router router(pd_set({.decode_overlap_credit = 1.0}));
  router.on_kv_batch(3, false, stored_batch({10, 20, 30}), t0);
  for (std::uint64_t id = 1; id <= 3; ++id) {
    const route_decision decision = router.decide(pair_query(id, request_hashes({10, 20, 30})), t0);
    ASSERT_TRUE(decision.ok());
    EXPECT_EQ(decision.worker, 3u);
    EXPECT_EQ(decision.overlap_blocks, 3u);
    router.on_lifecycle({lifecycle_event::kind::finished, id, 3, 0}, t0);
    router.on_lifecycle({lifecycle_event::kind::finished, prefill_leg_id(id), *decision.prefill_worker, 0}, t0);
  }
}

TEST(worker_set_router_pd, a_prompt_mostly_cached_on_its_decode_worker_runs_there_when_the_rule_allows) {
  worker_set_router router(pd_set({.decode_overlap_credit = 1.0, .max_local_prefill_tokens = 2 * test_block_size}));
  router.on_kv_batch(2, false, stored_batch({10, 20, 30}), t0);
  const route_decision short_rest = router.decide(pair_query(1, request_hashes({10, 20, 30, 40})), t0);
  ASSERT_TRUE(short_rest.ok());
  EXPECT_EQ(short_rest.worker, 2u);
  EXPECT_TRUE(short_rest.local_prefill);
  EXPECT_FALSE(short_rest.prefill_worker);
  EXPECT_EQ(router.loads().load(2).prefill_tokens, 1 * test_block_size) << "booked as an aggregated request: its uncached block";
  const route_decision long_rest = router.decide(pair_query(2, request_hashes({10, 50, 60, 70})), t0);
  ASSERT_TRUE(long_rest.ok());
  EXPECT_FALSE(long_rest.local_prefill);
  EXPECT_TRUE(long_rest.prefill_worker);
}

TEST(worker_set_router_pd, with_every_decode_worker_down_a_pair_cannot_be_made) {
  worker_set_router router(pd_set());
  router.on_health(2, false, t0);
  router.on_health(3, false, t0);
  const route_decision decision = router.decide(pair_query(1, request_hashes({1})), t0);
  EXPECT_EQ(decision.failure, route_failure::no_decode_worker);
  for (std::uint32_t w = 0; w < 4; ++w) EXPECT_EQ(router.loads().load(w), worker_load{}) << "nothing booked";
}

TEST(worker_set_router_pd, a_retry_excludes_the_failed_worker_from_its_pool) {
  worker_set_router router(pd_set());
  const std::vector<std::uint32_t> excluded{1, 3};
  const auto hashes = request_hashes({1, 2});  // outlives the query, which only views it
  route_query query = pair_query(1, hashes);
  query.excluded_workers = excluded;
  const route_decision decision = router.decide(query, t0);
  ASSERT_TRUE(decision.ok());
  EXPECT_EQ(*decision.prefill_worker, 0u);
  EXPECT_EQ(decision.worker, 2u);
}

TEST(worker_set_router_pd, workers_of_both_roles_serve_in_either_pool) {
  worker_set_router_settings settings = pd_set();
  settings.worker_names = {"both0", "d0"};
  settings.worker_roles = {worker_role::both, worker_role::decode};
  worker_set_router router(settings);
  router.on_health(1, false, t0);
  const route_decision decision = router.decide(pair_query(1, request_hashes({1, 2})), t0);
  ASSERT_TRUE(decision.ok());
  EXPECT_EQ(*decision.prefill_worker, 0u);
  EXPECT_EQ(decision.worker, 0u) << "one worker may take both legs";
}

}  // namespace
}  // namespace kvr
