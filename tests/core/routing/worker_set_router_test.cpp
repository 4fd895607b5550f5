#include "core/routing/worker_set_router.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/core/routing/prefix_index_fixtures.hpp"

namespace kvr {
namespace {

using namespace std::chrono_literals;
using testing::make_stored;
using testing::request_hashes;
using testing::stored_batch;
using testing::test_block_size;

const time_point t0{};

/// A kv-mode set of `workers` workers, one publisher each unless `publisher_worker` says otherwise.
worker_set_router_settings kv_set(std::uint32_t workers, std::vector<std::uint32_t> publisher_worker = {}) {
  worker_set_router_settings settings;
  settings.config.block_size = test_block_size;
  for (std::uint32_t w = 0; w < workers; ++w) settings.worker_names.push_back("w" + std::to_string(w));
  settings.publisher_worker = std::move(publisher_worker);
  settings.unhealthy_backoff = 5s;
  settings.index_grace = 60s;
  settings.max_request_age = 1h;
  return settings;
}

struct query_builder {
  std::vector<std::uint64_t> hashes;
  std::vector<std::uint32_t> excluded;
  route_query query(std::uint64_t id, bool dry_run = false) const {
    return {.request_id = id,
            .sequence_hashes = hashes,
            .prompt_tokens = static_cast<std::uint32_t>(hashes.size() * test_block_size),
            .excluded_workers = excluded,
            .dry_run = dry_run};
  }
};

TEST(worker_set_router, sends_a_prompt_to_the_worker_whose_events_show_its_longest_prefix) {
  worker_set_router router(kv_set(3));
  router.on_kv_batch(1, false, stored_batch({10, 20, 30}), t0);
  router.on_kv_batch(2, false, stored_batch({10}), t0);
  const query_builder prompt{request_hashes({10, 20, 30, 40})};
  const route_decision decision = router.decide(prompt.query(1), t0);
  ASSERT_TRUE(decision.ok());
  EXPECT_EQ(decision.worker, 1u);
  EXPECT_EQ(decision.overlap_blocks, 3u);
  EXPECT_EQ(decision.prompt_blocks, 4u);
}

TEST(worker_set_router, a_prompt_goes_where_a_lower_tier_holds_it_and_a_retuned_weight_of_zero_forgets_that) {
  // Worker 1 holds the prompt on its host tier (offloaded from its GPU), worker 0 nothing: the
  // cost credits host blocks at 0.75, so worker 1 wins. A weight of 0 makes them worth nothing.
  worker_set_router router(kv_set(2));
  kv_batch offloaded = stored_batch({10, 20, 30});
  std::get<kv_stored>(offloaded.events[0]).medium = "CPU";
  router.on_kv_batch(1, false, offloaded, t0);
  const query_builder prompt{request_hashes({10, 20, 30, 40})};
  const route_decision decision = router.decide(prompt.query(1, true), t0);
  ASSERT_TRUE(decision.ok());
  EXPECT_EQ(decision.worker, 1u);
  EXPECT_EQ(decision.overlap_blocks, 0u) << "the GPU chain holds none of it";
  router_config gpu_only = kv_set(2).config;
  gpu_only.tier_weights.host = 0;
  router.retune(gpu_only);
  int on_worker_0 = 0;
  for (std::uint64_t id = 2; id < 40; ++id) on_worker_0 += router.decide(prompt.query(id, true), t0).worker == 0 ? 1 : 0;
  EXPECT_GT(on_worker_0, 0) << "a tie between the two: both are picked";
}

TEST(worker_set_router, counts_the_prompt_blocks_it_routes_and_those_found_cached_but_not_dry_runs) {
  worker_set_router router(kv_set(2));
  router.on_kv_batch(1, false, stored_batch({10, 20, 30}), t0);
  ASSERT_TRUE(router.decide(query_builder{request_hashes({10, 20, 30, 40})}.query(1), t0).ok());
  ASSERT_TRUE(router.decide(query_builder{request_hashes({50, 60})}.query(2), t0).ok());
  ASSERT_TRUE(router.decide(query_builder{request_hashes({10, 20})}.query(3, true), t0).ok());
  const worker_set_status status = router.status(t0);
  EXPECT_EQ(status.prompt_blocks_routed, 6u);
  EXPECT_EQ(status.overlap_blocks_routed, 3u);
}

TEST(worker_set_router, keeps_a_session_on_its_worker_within_the_slack_and_moves_it_when_that_worker_is_down) {
  worker_set_router_settings settings = kv_set(3);
  settings.config.mode = router_mode::round_robin;
  settings.config.session_affinity_ttl_secs = 60;
  worker_set_router router(settings);
  route_query turn{.request_id = 1, .prompt_tokens = 64, .session = 42};
  const route_decision first = router.decide(turn, t0);
  ASSERT_TRUE(first.ok());
  for (std::uint64_t id = 2; id < 8; ++id) {
    turn.request_id = id;
    const route_decision next = router.decide(turn, t0 + std::chrono::seconds(id));
    ASSERT_TRUE(next.ok());
    EXPECT_EQ(next.worker, first.worker) << "round-robin would have moved turn " << id;
  }
  router.on_lifecycle({lifecycle_event::kind::worker_failed, 7, first.worker, 0}, t0 + 8s);  // backing off: unroutable
  turn.request_id = 8;
  const route_decision moved = router.decide(turn, t0 + 9s);
  ASSERT_TRUE(moved.ok());
  EXPECT_NE(moved.worker, first.worker);
  turn.request_id = 9;
  EXPECT_EQ(router.decide(turn, t0 + 20s).worker, moved.worker) << "it stays where it moved, even once the first is back";
  EXPECT_EQ(router.status(t0 + 20s).session_moves, 1u);
  EXPECT_EQ(router.status(t0 + 20s).session_bindings, 1u);
}

TEST(worker_set_router, leaves_a_bound_worker_whose_cost_exceeds_the_best_by_more_than_the_slack) {
  worker_set_router_settings settings = kv_set(2);
  settings.config.overlap_score_credit = 0;  // load only
  settings.config.session_affinity_ttl_secs = 60;
  settings.config.session_affinity_slack = 10;
  worker_set_router router(settings);
  const route_decision first = router.decide({.request_id = 1, .prompt_tokens = test_block_size, .session = 5}, t0);
  ASSERT_TRUE(first.ok());
  // Load the bound worker with 3 blocks of other work (8 blocks booked with the session's own,
  // prefill and decode): within the slack of 10, the session stays.
  router.on_lifecycle({lifecycle_event::kind::booked, 100, first.worker, 3 * test_block_size}, t0);
  EXPECT_EQ(router.decide({.request_id = 2, .prompt_tokens = test_block_size, .session = 5}, t0).worker, first.worker);
  // 40 more blocks: now past the slack, it moves to the idle worker.
  router.on_lifecycle({lifecycle_event::kind::booked, 101, first.worker, 40 * test_block_size}, t0);
  EXPECT_NE(router.decide({.request_id = 3, .prompt_tokens = test_block_size, .session = 5}, t0).worker, first.worker);
}

TEST(worker_set_router, takes_the_best_rank_of_a_data_parallel_worker_as_its_overlap) {
  // Publishers 0 and 1 are ranks of worker 0; publisher 2 is worker 1.
  worker_set_router router(kv_set(2, {0, 0, 1}));
  router.on_kv_batch(1, false, stored_batch({10, 20, 30}), t0);
  router.on_kv_batch(2, false, stored_batch({10, 20}), t0);
  const query_builder prompt{request_hashes({10, 20, 30})};
  const route_decision decision = router.decide(prompt.query(1), t0);
  ASSERT_TRUE(decision.ok());
  EXPECT_EQ(decision.worker, 0u);
  EXPECT_EQ(decision.overlap_blocks, 3u);
  EXPECT_EQ(router.status(t0).workers[0].index_blocks, 3u);
  EXPECT_EQ(router.status(t0).workers[1].index_blocks, 2u);
}

TEST(worker_set_router, ignores_batches_of_publishers_it_does_not_know) {
  worker_set_router router(kv_set(2));
  router.on_kv_batch(7, false, stored_batch({10, 20}), t0);
  EXPECT_EQ(router.index().total_blocks(), 0u);
}

TEST(worker_set_router, clears_a_publisher_before_a_batch_that_asks_for_it) {
  worker_set_router router(kv_set(1));
  router.on_kv_batch(0, false, stored_batch({10, 20}), t0);
  router.on_kv_batch(0, true, stored_batch({50}), t0);
  EXPECT_EQ(router.index().total_blocks(), 1u);
  EXPECT_EQ(router.dump_index()["subscriber_clears"], 1);
}

TEST(worker_set_router, books_the_chosen_worker_and_releases_it_when_the_request_finishes) {
  worker_set_router router(kv_set(2));
  const query_builder prompt{request_hashes({10, 20})};
  const route_decision decision = router.decide(prompt.query(42), t0);
  ASSERT_TRUE(decision.ok());
  EXPECT_EQ(router.loads().load(decision.worker).requests, 1u);
  EXPECT_EQ(router.loads().load(decision.worker).prefill_tokens, 8u);
  router.on_lifecycle({lifecycle_event::kind::first_token, 42, decision.worker, 0}, t0);
  EXPECT_EQ(router.loads().load(decision.worker).prefill_tokens, 0u);
  router.on_lifecycle({lifecycle_event::kind::finished, 42, decision.worker, 0}, t0);
  EXPECT_EQ(router.loads().load(decision.worker).requests, 0u);
  EXPECT_EQ(router.status(t0).routed, 1u);
}

TEST(worker_set_router, a_busy_worker_loses_the_next_prompt_that_no_one_caches) {
  worker_set_router router(kv_set(2));
  const query_builder first{request_hashes({10, 20, 30, 40})};
  const route_decision a = router.decide(first.query(1), t0);
  const query_builder second{request_hashes({70, 80})};
  const route_decision b = router.decide(second.query(2), t0);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a.worker, b.worker);
}

TEST(worker_set_router, a_dry_run_decides_and_lists_candidates_but_books_nothing) {
  worker_set_router router(kv_set(2));
  router.on_kv_batch(0, false, stored_batch({10}), t0);
  const query_builder prompt{request_hashes({10, 20})};
  const route_decision decision = router.decide(prompt.query(1, true), t0);
  ASSERT_TRUE(decision.ok());
  EXPECT_EQ(decision.worker, 0u);
  ASSERT_EQ(decision.candidates.size(), 2u);
  EXPECT_EQ(decision.candidates[0].overlap_blocks, 1u);
  EXPECT_EQ(router.loads().in_flight(), 0u);
  EXPECT_EQ(router.status(t0).dry_runs, 1u);
  EXPECT_EQ(router.status(t0).routed, 0u);
}

TEST(worker_set_router, keeps_a_failed_worker_out_for_the_back_off_then_takes_it_back) {
  worker_set_router router(kv_set(2));
  router.on_lifecycle({lifecycle_event::kind::worker_failed, 9, 0, 0}, t0);
  EXPECT_FALSE(router.healthy(0, t0 + 4s));
  EXPECT_EQ(router.status(t0).workers[0].failures, 1u);
  const query_builder prompt{request_hashes({10})};
  for (std::uint64_t id = 1; id <= 20; ++id) {
    const route_decision decision = router.decide(prompt.query(id), t0 + 1s);
    ASSERT_TRUE(decision.ok());
    EXPECT_EQ(decision.worker, 1u);
  }
  EXPECT_TRUE(router.healthy(0, t0 + 5s));
}

struct failure_case {
  const char* name;
  std::vector<std::uint32_t> excluded;
  std::vector<std::uint32_t> down;
  route_failure expected;
};

void PrintTo(const failure_case& c, std::ostream* os) { *os << c.name; }

class worker_set_router_failures : public ::testing::TestWithParam<failure_case> {};

TEST_P(worker_set_router_failures, names_why_no_worker_was_chosen) {
  const failure_case& c = GetParam();
  worker_set_router router(kv_set(2));
  for (std::uint32_t w : c.down) router.on_health(w, false, t0);
  query_builder prompt{request_hashes({10})};
  prompt.excluded = c.excluded;
  const route_decision decision = router.decide(prompt.query(1), t0);
  EXPECT_EQ(decision.failure, c.expected);
  if (!decision.ok()) EXPECT_EQ(router.status(t0).unroutable, 1u);
}

INSTANTIATE_TEST_SUITE_P(
    table, worker_set_router_failures,
    ::testing::Values(failure_case{"all_healthy", {}, {}, route_failure::none},
                      failure_case{"one_excluded", {0}, {}, route_failure::none},
                      failure_case{"both_excluded", {0, 1}, {}, route_failure::every_worker_failed},
                      failure_case{"both_down", {}, {0, 1}, route_failure::no_healthy_worker},
                      failure_case{"one_down_one_excluded", {1}, {0}, route_failure::every_worker_failed}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(worker_set_router, keeps_a_down_workers_index_through_the_grace_period_then_drops_it) {
  worker_set_router router(kv_set(2, {0, 0, 1}));
  router.on_kv_batch(0, false, stored_batch({10, 20}), t0);
  router.on_kv_batch(1, false, stored_batch({30}), t0);
  router.on_kv_batch(2, false, stored_batch({40}), t0);
  router.on_health(0, false, t0);
  router.tick(t0 + 59s);
  EXPECT_EQ(router.index().total_blocks(), 4u);
  router.tick(t0 + 60s);
  EXPECT_EQ(router.index().worker_blocks(0), 0u);
  EXPECT_EQ(router.index().worker_blocks(1), 0u);
  EXPECT_EQ(router.index().worker_blocks(2), 1u);
  router.on_health(0, true, t0 + 61s);
  EXPECT_TRUE(router.healthy(0, t0 + 61s));
}

TEST(worker_set_router, a_worker_back_before_its_grace_ends_keeps_its_index) {
  worker_set_router router(kv_set(1));
  router.on_kv_batch(0, false, stored_batch({10, 20}), t0);
  router.on_health(0, false, t0);
  router.on_health(0, true, t0 + 30s);
  router.tick(t0 + 90s);
  EXPECT_EQ(router.index().total_blocks(), 2u);
}

TEST(worker_set_router, books_what_ingress_routed_itself_once_per_request) {
  worker_set_router_settings settings = kv_set(2);
  settings.config.mode = router_mode::round_robin;
  worker_set_router router(settings);
  router.on_lifecycle({lifecycle_event::kind::booked, 5, 1, 100}, t0);
  router.on_lifecycle({lifecycle_event::kind::booked, 5, 1, 100}, t0);  // a duplicate: counted once
  EXPECT_EQ(router.loads().load(1).requests, 1u);
  EXPECT_EQ(router.loads().load(1).prefill_tokens, 100u);
  EXPECT_EQ(router.status(t0).workers[1].routed, 1u);
  router.on_lifecycle({lifecycle_event::kind::booked, 6, 9, 100}, t0);  // no such worker
  EXPECT_EQ(router.status(t0).routed, 1u);
}

TEST(worker_set_router, expires_bookings_whose_end_never_came) {
  worker_set_router router(kv_set(1));
  const query_builder prompt{request_hashes({10})};
  ASSERT_TRUE(router.decide(prompt.query(1), t0).ok());
  router.tick(t0 + 59min);
  EXPECT_EQ(router.loads().in_flight(), 1u);
  router.tick(t0 + 61min);
  EXPECT_EQ(router.loads().in_flight(), 0u);
  EXPECT_EQ(router.status(t0 + 61min).expired_bookings, 1u);
}

TEST(worker_set_router, approximate_mode_predicts_the_chosen_worker_caches_the_prompt) {
  worker_set_router_settings settings = kv_set(3);
  settings.config.use_kv_events = false;
  worker_set_router router(settings);
  const query_builder prompt{request_hashes({10, 20, 30})};
  const route_decision first = router.decide(prompt.query(1), t0);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first.overlap_blocks, 0u);
  router.on_lifecycle({lifecycle_event::kind::finished, 1, first.worker, 0}, t0);
  const route_decision second = router.decide(prompt.query(2), t0 + 1s);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second.worker, first.worker);
  EXPECT_EQ(second.overlap_blocks, 3u);
}

TEST(worker_set_router, the_same_seed_makes_the_same_sequence_of_picks) {
  auto picks = [](std::uint64_t seed) {
    worker_set_router_settings settings = kv_set(4);
    settings.seed = seed;
    settings.config.mode = router_mode::random;
    worker_set_router router(settings);
    std::vector<std::uint32_t> out;
    const query_builder prompt{request_hashes({10})};
    for (std::uint64_t id = 1; id <= 64; ++id) out.push_back(router.decide(prompt.query(id, true), t0).worker);
    return out;
  };
  EXPECT_EQ(picks(7), picks(7));
  EXPECT_NE(picks(7), picks(8));
}

}  // namespace
}  // namespace kvr

namespace kvr {
namespace {

TEST(worker_set_router, a_retune_changes_the_weights_and_keeps_the_index_and_the_bookings) {
  worker_set_router_settings settings = kv_set(2);
  settings.config.prefill_load_scale = 10;  // prefill work dominates: the cached worker wins
  worker_set_router router(settings);
  router.on_kv_batch(0, false, stored_batch({10, 20, 30}), t0);
  query_builder elsewhere{request_hashes({90})};
  elsewhere.excluded = {1};
  ASSERT_EQ(router.decide(elsewhere.query(1), t0).worker, 0u) << "w0 now has a request in flight";
  const query_builder prompt{request_hashes({10, 20, 30, 40})};
  EXPECT_EQ(router.decide(prompt.query(2, true), t0).worker, 0u);

  router_config cheap_prefill = settings.config;
  cheap_prefill.prefill_load_scale = 0.1;  // decode load dominates: the idle worker wins
  router_config cheap_prefill_no_overlap = cheap_prefill;
  cheap_prefill_no_overlap.overlap_score_credit = 0;  // would stop scoring overlap: needs a rebuilt set
  router.retune(cheap_prefill_no_overlap);
  EXPECT_EQ(router.decide(prompt.query(3, true), t0).worker, 0u) << "a change beyond the weights is refused";

  router.retune(cheap_prefill);
  EXPECT_EQ(router.decide(prompt.query(4, true), t0).worker, 1u);
  EXPECT_EQ(router.status(t0).index_blocks, 3u) << "the index stays";
  EXPECT_EQ(router.loads().in_flight(), 1u) << "the booking stays";
}

}  // namespace
}  // namespace kvr

namespace kvr {
namespace {

/// A set that queues: a worker is busy past one prefill batch of `batch` booked tokens.
worker_set_router_settings queueing_set(std::uint32_t workers, std::uint32_t batch) {
  worker_set_router_settings settings = kv_set(workers);
  settings.config.busy_threshold = 1.0;
  settings.config.max_num_batched_tokens = batch;
  settings.engine_metrics_ttl = 3s;
  return settings;
}

engine_metrics waiting(double requests) {
  engine_metrics m;
  m.waiting_requests = requests;
  m.running_requests = 1;
  return m;
}

TEST(worker_set_router, a_worker_past_its_booked_prefill_threshold_is_busy_and_passed_over) {
  worker_set_router router(queueing_set(2, 16));
  query_builder big{request_hashes({90, 91, 92, 93, 94})};  // 5 blocks of 4 tokens: 20 > 16
  big.excluded = {0};
  ASSERT_EQ(router.decide(big.query(1), t0).worker, 1u);
  EXPECT_TRUE(router.busy(1, t0));
  EXPECT_FALSE(router.busy(0, t0));
  // w1 is busy, so even a prompt only w1 caches goes to w0 ... and then both are busy.
  router.on_kv_batch(1, false, stored_batch({10, 20, 30, 40}), t0);
  const query_builder cached{request_hashes({10, 20, 30, 40, 50})};
  EXPECT_EQ(router.decide(cached.query(2), t0).worker, 0u);
  const route_decision third = router.decide(cached.query(3), t0);
  EXPECT_EQ(third.failure, route_failure::every_worker_busy);
  EXPECT_EQ(router.loads().in_flight(), 2u) << "a request told to wait is not booked";
  // A first token ends w1's prefill: it is free again, and its cache wins.
  router.on_lifecycle({lifecycle_event::kind::first_token, 1, 1, 0}, t0);
  EXPECT_FALSE(router.busy(1, t0));
  EXPECT_EQ(router.decide(cached.query(3), t0).worker, 1u);
  EXPECT_FALSE(router.busy(1, t0)) << "4 tokens left to prefill after 4 cached blocks";
}

TEST(worker_set_router, without_a_queue_busy_workers_are_avoided_but_never_refuse_a_request) {
  worker_set_router_settings settings = kv_set(2);  // busy_threshold 0: no queue
  settings.config.engine_waiting_busy = true;         // the hard filter, as kv mode had it by default
  settings.config.engine_queue_weight = 0;            // the engines' queues not priced: the cache decides
  worker_set_router router(settings);
  router.on_engine_metrics(0, waiting(3), t0);
  router.on_engine_metrics(1, waiting(0), t0);
  EXPECT_TRUE(router.busy(0, t0)) << "an engine reporting waiting requests is busy, queue or not";
  router.on_kv_batch(0, false, stored_batch({10, 20, 30}), t0);
  const query_builder cached{request_hashes({10, 20, 30, 40})};
  EXPECT_EQ(router.decide(cached.query(1, true), t0).worker, 1u) << "the free worker is taken over the cached one";
  router.on_engine_metrics(1, waiting(2), t0);
  const route_decision both_busy = router.decide(cached.query(2), t0);
  ASSERT_TRUE(both_busy.ok()) << "with no queue, all busy means: route as before";
  EXPECT_EQ(both_busy.worker, 0u);
}

TEST(worker_set_router, with_engine_waiting_busy_off_a_queue_is_priced_not_obeyed) {
  worker_set_router_settings settings = kv_set(2);
  settings.config.engine_waiting_busy = false;
  worker_set_router router(settings);
  router.on_kv_batch(0, false, stored_batch({10, 20, 30}), t0);
  const query_builder cached{request_hashes({10, 20, 30, 40})};
  router.on_engine_metrics(0, waiting(1), t0);
  router.on_engine_metrics(1, waiting(0), t0);
  EXPECT_FALSE(router.busy(0, t0)) << "waiting requests do not make a worker busy";
  // One request of this prompt's length waiting ahead (4 blocks) outweighs 3 cached blocks.
  EXPECT_EQ(router.decide(cached.query(1, true), t0).worker, 1u);
  // A queue no longer than this router's own unstarted requests there is not counted twice:
  // they are booked already. Booked on worker 0 and waiting there, the cache wins again.
  worker_set_router_settings fresh_settings = kv_set(2);
  fresh_settings.config.engine_waiting_busy = false;
  worker_set_router fresh(fresh_settings);
  fresh.on_kv_batch(0, false, stored_batch({10, 20, 30}), t0);
  const route_decision first = fresh.decide(cached.query(1), t0);
  ASSERT_EQ(first.worker, 0u);
  fresh.on_engine_metrics(0, waiting(1), t0);  // the first request, not yet started
  fresh.on_engine_metrics(1, waiting(0), t0);
  EXPECT_EQ(fresh.decide(cached.query(2, true), t0).worker, 0u) << "the waiting request is the router's own";
  fresh.on_engine_metrics(0, waiting(3), t0);  // two more than it sent: priced
  const route_decision priced = fresh.decide(cached.query(3, true), t0);
  EXPECT_EQ(priced.worker, 1u);
  ASSERT_EQ(priced.candidates.size(), 2u);
  EXPECT_EQ(priced.candidates[0].engine_queued_requests, 2.0) << "a dry run shows the queue it priced";
  EXPECT_EQ(priced.candidates[1].engine_queued_requests, 0.0);
}

TEST(worker_set_router, an_engine_queue_weight_of_zero_leaves_the_queue_out_of_the_cost) {
  worker_set_router_settings settings = kv_set(2);
  settings.config.engine_waiting_busy = false;
  settings.config.engine_queue_weight = 0;
  worker_set_router router(settings);
  router.on_kv_batch(0, false, stored_batch({10, 20, 30}), t0);
  router.on_engine_metrics(0, waiting(5), t0);
  EXPECT_EQ(router.decide(query_builder{request_hashes({10, 20, 30, 40})}.query(1, true), t0).worker, 0u);
}

TEST(worker_set_router, the_load_only_modes_obey_an_engines_queue_having_no_cost_to_price_it_in) {
  for (const router_mode mode : {router_mode::round_robin, router_mode::random, router_mode::power_of_two, router_mode::least_loaded}) {
    worker_set_router_settings settings = kv_set(2);
    settings.config.mode = mode;
    settings.config.engine_waiting_busy = false;
    worker_set_router router(settings);
    router.on_engine_metrics(0, waiting(1), t0);
    EXPECT_TRUE(router.busy(0, t0));
    EXPECT_EQ(router.decide(query_builder{request_hashes({1, 2})}.query(1, true), t0).worker, 1u);
  }
  worker_set_router kv(kv_set(2));
  kv.on_engine_metrics(0, waiting(1), t0);
  EXPECT_FALSE(kv.busy(0, t0)) << "kv mode prices it by default";
}

TEST(worker_set_router, engine_metrics_count_only_while_fresh) {
  worker_set_router_settings settings = queueing_set(2, 8192);
  settings.config.engine_waiting_busy = true;
  worker_set_router router(settings);
  router.on_engine_metrics(0, waiting(5), t0);
  EXPECT_TRUE(router.busy(0, t0 + 2s));
  EXPECT_FALSE(router.busy(0, t0 + 3s)) << "a scrape older than the freshness limit says nothing";
  EXPECT_FALSE(router.status(t0 + 3s).workers[0].engine.waiting_requests.has_value());
  EXPECT_EQ(router.status(t0 + 1s).workers[0].engine.waiting_requests, 5.0);
}

TEST(worker_set_router, an_engines_own_prefill_batch_size_overrides_the_configured_one) {
  worker_set_router router(queueing_set(1, 16));
  const query_builder prompt{request_hashes({1, 2, 3, 4, 5})};  // 20 tokens
  ASSERT_TRUE(router.decide(prompt.query(1), t0).ok());
  EXPECT_TRUE(router.busy(0, t0));
  engine_metrics sglang = waiting(0);
  sglang.max_num_batched_tokens = 16384;
  router.on_engine_metrics(0, sglang, t0);
  EXPECT_FALSE(router.busy(0, t0));
}

TEST(worker_set_router, busy_workers_excluded_or_down_do_not_make_a_request_wait) {
  worker_set_router router(queueing_set(2, 16));
  const query_builder big{request_hashes({1, 2, 3, 4, 5})};
  ASSERT_EQ(router.decide(big.query(1), t0).worker, 0u);  // w0 busy now
  router.on_health(1, false, t0);
  EXPECT_EQ(router.decide(big.query(2), t0).failure, route_failure::every_worker_busy)
      << "the only routable worker is busy: wait";
  query_builder retry = big;
  retry.excluded = {0};
  EXPECT_EQ(router.decide(retry.query(3), t0).failure, route_failure::every_worker_failed)
      << "nothing routable is left at all: no point waiting";
  EXPECT_TRUE(router.decide(big.query(4, true), t0).ok()) << "a dry run never waits";
  EXPECT_TRUE(router.decide(big.query(4, true), t0).candidates[0].busy);
}

}  // namespace
}  // namespace kvr

namespace kvr {
namespace {

TEST(worker_set_router, an_engine_whose_start_time_moves_on_restarted_and_loses_its_index_entries) {
  worker_set_router router(kv_set(2));
  router.on_kv_batch(0, false, stored_batch({10, 20}), t0);
  router.on_kv_batch(1, false, stored_batch({30}), t0);
  engine_metrics scrape;
  scrape.waiting_requests = 0;
  scrape.start_time = 1000.0;
  EXPECT_FALSE(router.on_engine_metrics(0, scrape, t0)) << "the first start time seen is no restart";
  EXPECT_FALSE(router.on_engine_metrics(0, scrape, t0 + 1s));
  scrape.start_time = 1500.0;
  EXPECT_TRUE(router.on_engine_metrics(0, scrape, t0 + 2s));
  const worker_set_status status = router.status(t0 + 2s);
  EXPECT_EQ(status.workers[0].index_blocks, 0u);
  EXPECT_EQ(status.workers[0].engine_restarts, 1u);
  EXPECT_EQ(status.workers[1].index_blocks, 1u) << "other workers keep theirs";
  scrape.start_time.reset();
  EXPECT_FALSE(router.on_engine_metrics(0, scrape, t0 + 3s)) << "a scrape without the gauge proves nothing";
}

}  // namespace
}  // namespace kvr

namespace kvr {
namespace {

/// A replica's set that shares its bookings with peers.
worker_set_router_settings shared_set(std::uint32_t workers) {
  worker_set_router_settings settings = kv_set(workers);
  settings.share_bookings = true;
  settings.peer_timeout = 3s;
  return settings;
}

peer_bookings_message from_peer(std::uint64_t sequence, std::vector<peer_event> events) {
  return {.origin = {.replica = "peer", .incarnation = 1, .sequence = sequence, .sent_unix_ns = 0}, .events = std::move(events)};
}

TEST(worker_set_router_replicas, every_booking_step_goes_to_the_outbox_once_and_unknown_ones_not_at_all) {
  worker_set_router router(shared_set(2));
  const query_builder prompt{request_hashes({10, 20})};
  const route_decision decision = router.decide(prompt.query(7), t0);
  ASSERT_TRUE(decision.ok());
  router.on_lifecycle({lifecycle_event::kind::first_token, 7, decision.worker, 0}, t0);
  router.on_lifecycle({lifecycle_event::kind::finished, 7, decision.worker, 0}, t0);
  router.on_lifecycle({lifecycle_event::kind::finished, 7, decision.worker, 0}, t0);  // repeated: not sent again
  router.on_lifecycle({lifecycle_event::kind::first_token, 99, 0, 0}, t0);            // never booked
  router.on_lifecycle({lifecycle_event::kind::booked, 8, 1, 40}, t0);                 // ingress's own pick
  const std::vector<peer_event> out = router.take_outbox();
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].what, peer_event::kind::booked);
  EXPECT_EQ(out[0].request_id, 7u);
  EXPECT_EQ(out[0].worker, "w" + std::to_string(decision.worker));
  EXPECT_EQ(out[0].prompt_tokens, 2 * test_block_size);
  EXPECT_EQ(out[0].sequence_hashes, prompt.hashes);  // in-flight blocks are shared by hash
  EXPECT_EQ(out[1].what, peer_event::kind::first_token);
  EXPECT_EQ(out[2].what, peer_event::kind::finished);
  EXPECT_EQ(out[3].worker, "w1");
  EXPECT_EQ(out[3].prompt_tokens, 40u);
  EXPECT_TRUE(router.take_outbox().empty());
}

TEST(worker_set_router_replicas, a_set_that_does_not_share_keeps_no_outbox) {
  worker_set_router router(kv_set(2));
  ASSERT_TRUE(router.decide(query_builder{request_hashes({10})}.query(1), t0).ok());
  EXPECT_EQ(router.outbox_size(), 0u);
}

TEST(worker_set_router_replicas, a_peers_bookings_make_its_worker_costlier_here_until_they_finish) {
  worker_set_router router(shared_set(2));
  router.on_peer_message(from_peer(1, {{.what = peer_event::kind::booked, .request_id = 1, .worker = "w0", .prompt_tokens = 4000}}), t0);
  const query_builder prompt{request_hashes({10, 20})};
  for (std::uint64_t id = 10; id < 14; ++id) {
    const route_decision decision = router.decide(prompt.query(id), t0);
    ASSERT_TRUE(decision.ok());
    EXPECT_EQ(decision.worker, 1u) << "request " << id;
    router.on_lifecycle({lifecycle_event::kind::finished, id, 1, 0}, t0);
  }
  router.on_peer_message(from_peer(2, {{.what = peer_event::kind::finished, .request_id = 1}}), t0);
  const worker_set_status status = router.status(t0);
  EXPECT_EQ(status.workers[0].remote, worker_load{});
  ASSERT_EQ(status.peers.size(), 1u);
  EXPECT_EQ(status.peers[0].replica, "peer");
}

TEST(worker_set_router_replicas, a_dry_run_shows_the_total_booked_load_and_the_remote_part_beside_it) {
  worker_set_router router(shared_set(2));
  router.on_lifecycle({lifecycle_event::kind::booked, 5, 0, 100}, t0);
  router.on_peer_message(from_peer(1, {{.what = peer_event::kind::booked, .request_id = 1, .worker = "w0", .prompt_tokens = 60}}), t0);
  const route_decision decision = router.decide(query_builder{request_hashes({10})}.query(9, true), t0);
  ASSERT_TRUE(decision.ok());
  ASSERT_EQ(decision.candidates.size(), 2u);
  EXPECT_EQ(decision.candidates[0].active_prefill_tokens, 160u);
  EXPECT_EQ(decision.candidates[0].remote_prefill_tokens, 60u);
  EXPECT_EQ(decision.candidates[1].active_prefill_tokens, 0u);
  const worker_set_status status = router.status(t0);
  EXPECT_EQ(status.workers[0].prefill_tokens, 100u);  // the status keeps the two apart
  EXPECT_EQ(status.workers[0].remote.prefill_tokens, 60u);
}

TEST(worker_set_router_replicas, a_peer_that_falls_silent_takes_its_load_with_it_at_the_next_tick) {
  worker_set_router router(shared_set(2));
  router.on_peer_message(from_peer(1, {{.what = peer_event::kind::booked, .request_id = 1, .worker = "w1", .prompt_tokens = 64}}), t0);
  router.tick(t0 + 2s);
  EXPECT_EQ(router.status(t0 + 2s).workers[1].remote.requests, 1u);
  router.tick(t0 + 4s);
  EXPECT_EQ(router.status(t0 + 4s).workers[1].remote.requests, 0u);
  EXPECT_TRUE(router.status(t0 + 4s).peers.empty());
}

TEST(worker_set_router_replicas, approximate_mode_learns_the_placements_peers_made) {
  worker_set_router_settings settings = shared_set(3);
  settings.config.use_kv_events = false;
  worker_set_router router(settings);
  const query_builder prompt{request_hashes({10, 20, 30})};
  router.on_peer_message(from_peer(1, {{.what = peer_event::kind::booked, .request_id = 1, .worker = "w2",
                                        .prompt_tokens = 3 * test_block_size, .sequence_hashes = prompt.hashes},
                                       {.what = peer_event::kind::finished, .request_id = 1}}),
                         t0);
  const route_decision decision = router.decide(prompt.query(2), t0 + 1s);
  ASSERT_TRUE(decision.ok());
  EXPECT_EQ(decision.worker, 2u);
  EXPECT_EQ(decision.overlap_blocks, 3u);
}

TEST(worker_set_router_replicas, its_own_bookings_are_listed_for_the_snapshot_as_they_were_made) {
  worker_set_router router(shared_set(2));
  router.on_lifecycle({lifecycle_event::kind::booked, 5, 1, 100}, t0);
  router.on_lifecycle({lifecycle_event::kind::booked, 6, 0, 30}, t0);
  router.on_lifecycle({lifecycle_event::kind::first_token, 6, 0, 0}, t0);
  auto own = router.own_bookings();
  std::sort(own.begin(), own.end(), [](const auto& a, const auto& b) { return a.request_id < b.request_id; });
  ASSERT_EQ(own.size(), 2u);
  EXPECT_EQ(own[0], (peer_snapshot_entry{.request_id = 5, .worker = "w1", .prompt_tokens = 100, .overlap_blocks = 0, .prefilled = false}));
  EXPECT_EQ(own[1], (peer_snapshot_entry{.request_id = 6, .worker = "w0", .prompt_tokens = 30, .overlap_blocks = 0, .prefilled = true}));
}

}  // namespace
}  // namespace kvr

namespace kvr {
namespace {

engine_metrics cache_of(std::uint64_t blocks) {
  engine_metrics m;
  m.num_gpu_blocks = blocks;
  return m;
}

/// Block ids 100, 101, ...: a chain of `n` blocks no prompt below shares.
std::vector<std::uint32_t> unrelated_blocks(std::uint32_t first, std::uint32_t n) {
  std::vector<std::uint32_t> ids;
  for (std::uint32_t i = 0; i < n; ++i) ids.push_back(first + 7 * i);
  return ids;
}

TEST(worker_set_router, sends_a_cold_prompt_where_it_evicts_nothing_rather_than_to_a_less_busy_full_cache) {
  const query_builder cold{request_hashes({10, 20, 30, 40})};
  for (const double weight : {8.0, 0.0}) {
    worker_set_router_settings settings = kv_set(2);
    settings.config.eviction_weight = weight;
    worker_set_router router(settings);
    router.on_engine_metrics(0, cache_of(8), t0);
    router.on_engine_metrics(1, cache_of(64), t0);
    router.on_kv_batch(0, false, stored_batch(unrelated_blocks(1000, 8)), t0);  // w0 full
    router.on_lifecycle({lifecycle_event::kind::booked, 1, 1, 8}, t0);          // w1 a little busier
    const route_decision decision = router.decide(cold.query(2, true), t0);
    ASSERT_TRUE(decision.ok());
    ASSERT_EQ(decision.candidates.size(), 2u);
    const candidate_view& full = decision.candidates[0];
    const candidate_view& roomy = decision.candidates[1];
    EXPECT_EQ(full.cached_blocks, 8u);
    EXPECT_EQ(full.cache_capacity_blocks, 8u);
    EXPECT_EQ(full.evicted_blocks, 4u);
    EXPECT_EQ(roomy.evicted_blocks, 0u);
    ASSERT_TRUE(full.cost && roomy.cost);
    if (weight > 0) {
      EXPECT_EQ(decision.worker, 1u) << "4 evicted blocks cost more than w1's extra load";
      EXPECT_DOUBLE_EQ(*full.cost, 4 + 4 + 8.0 * 4) << "prefill + decode + weight x evicted";
    } else {
      EXPECT_EQ(decision.worker, 0u) << "weight 0: the less busy worker wins";
    }
  }
}

TEST(worker_set_router, keeps_a_prompt_with_its_prefix_on_a_full_cache_when_moving_it_would_evict_more_than_the_load_it_saves) {
  worker_set_router_settings settings = kv_set(2);
  worker_set_router router(settings);
  router.on_engine_metrics(0, cache_of(8), t0);
  router.on_engine_metrics(1, cache_of(8), t0);
  router.on_kv_batch(0, false, stored_batch({10, 20, 30, 40, 50, 60, 70, 80}), t0);
  router.on_kv_batch(1, false, stored_batch(unrelated_blocks(1000, 8)), t0);
  // w0 holds the prefix and runs a request of 10 blocks; w1 is idle.
  router.on_lifecycle({lifecycle_event::kind::booked, 1, 0, 40}, t0);
  const query_builder prompt{request_hashes({10, 20, 30, 40, 50, 60, 70, 80, 90, 95})};
  EXPECT_EQ(router.decide(prompt.query(2, true), t0).worker, 0u) << "w1 would evict 10 cached blocks, w0 only 2";

  settings.config.eviction_weight = 0;
  worker_set_router plain(settings);
  plain.on_kv_batch(0, false, stored_batch({10, 20, 30, 40, 50, 60, 70, 80}), t0);
  plain.on_lifecycle({lifecycle_event::kind::booked, 1, 0, 40}, t0);
  EXPECT_EQ(plain.decide(prompt.query(2, true), t0).worker, 1u) << "load alone sends it away from its cache";
}

TEST(worker_set_router, learns_a_workers_cache_capacity_from_its_kv_events_once_they_remove_blocks) {
  worker_set_router router(kv_set(1));
  router.on_kv_batch(0, false, stored_batch({10, 20, 30, 40}), t0);
  const query_builder cold{request_hashes({1, 2})};
  route_decision decision = router.decide(cold.query(1, true), t0);
  EXPECT_FALSE(decision.candidates[0].cache_capacity_blocks) << "no removal yet: the cache may still be filling";
  EXPECT_EQ(decision.candidates[0].evicted_blocks, 0u);
  kv_batch evicted;
  evicted.events.emplace_back(kv_removed{.block_hashes = {1040}});
  router.on_kv_batch(0, false, evicted, t0);
  decision = router.decide(cold.query(2, true), t0);
  EXPECT_EQ(decision.candidates[0].cache_capacity_blocks, 4u);
  EXPECT_EQ(decision.candidates[0].cached_blocks, 3u);
  EXPECT_EQ(decision.candidates[0].evicted_blocks, 1u) << "2 new blocks, 1 free";
}

}  // namespace
}  // namespace kvr
