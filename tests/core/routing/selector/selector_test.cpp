#include "core/routing/selector/selector.hpp"

#include <map>

#include <gtest/gtest.h>

namespace kvr {
namespace {

router_config mode(router_mode m) {
  router_config config;
  config.mode = m;
  return config;
}

worker_id pick(const std::vector<worker_candidate>& candidates, const router_config& config, std::uint32_t isl,
               selector_rng& rng, std::uint64_t ticket = 0) {
  auto chosen = select_worker(candidates, config, {isl, ticket}, rng);
  EXPECT_TRUE(chosen);
  return chosen ? chosen->worker : ~0u;
}

std::map<worker_id, int> histogram(const std::vector<worker_candidate>& candidates, const router_config& config,
                                   int picks, std::uint32_t isl = 160) {
  selector_rng rng(1234);
  std::map<worker_id, int> counts;
  for (int i = 0; i < picks; ++i) ++counts[pick(candidates, config, isl, rng, static_cast<std::uint64_t>(i))];
  return counts;
}

TEST(selector, no_candidates_means_no_pick) {
  selector_rng rng(1);
  EXPECT_FALSE(select_worker({}, router_config{}, {160, 0}, rng));
}

TEST(selector, overlap_wins_when_loads_are_equal) {
  selector_rng rng(1);
  const std::vector<worker_candidate> workers{{0, 0, 0, 0}, {1, 6, 0, 0}, {2, 3, 0, 0}};
  for (int i = 0; i < 100; ++i) EXPECT_EQ(pick(workers, router_config{}, 160, rng), 1u);
}

TEST(selector, load_wins_when_the_overlap_credit_is_zero) {
  selector_rng rng(1);
  router_config config;
  config.overlap_score_credit = 0.0;
  const std::vector<worker_candidate> workers{{0, 10, 64, 4}, {1, 0, 0, 1}, {2, 10, 0, 8}};
  for (int i = 0; i < 100; ++i) EXPECT_EQ(pick(workers, config, 160, rng), 1u);
}

TEST(selector, a_hot_worker_loses_to_an_idle_one_once_its_queue_is_deep_enough) {
  selector_rng rng(1);
  // Worker 0 caches the whole 10-block prompt; worker 1 is idle with nothing cached. The cache
  // is worth 10 blocks, so worker 0 wins while its queue is under 10 blocks of work.
  for (std::uint64_t queued_blocks : {0u, 4u, 9u})
    EXPECT_EQ(pick({{0, 10, queued_blocks * 16, 0}, {1, 0, 0, 0}}, router_config{}, 160, rng), 0u) << queued_blocks;
  for (std::uint64_t queued_blocks : {11u, 20u, 100u})
    EXPECT_EQ(pick({{0, 10, queued_blocks * 16, 0}, {1, 0, 0, 0}}, router_config{}, 160, rng), 1u) << queued_blocks;
}

TEST(selector, ties_spread_evenly_over_many_picks) {
  const std::vector<worker_candidate> workers{{0, 2, 0, 0}, {1, 2, 0, 0}, {2, 2, 0, 0}, {3, 2, 0, 0}, {4, 0, 0, 0}};
  const auto counts = histogram(workers, router_config{}, 40000);
  EXPECT_EQ(counts.count(4), 0u);
  for (worker_id w = 0; w < 4; ++w) EXPECT_NEAR(counts.at(w), 10000, 500) << w;
}

TEST(selector, the_same_seed_gives_the_same_sequence_of_picks) {
  const std::vector<worker_candidate> workers{{0, 0, 0, 0}, {1, 0, 0, 0}, {2, 0, 0, 0}};
  auto picks = [&](std::uint64_t seed) {
    selector_rng rng(seed);
    std::vector<worker_id> out;
    for (int i = 0; i < 200; ++i) out.push_back(pick(workers, mode(router_mode::random), 160, rng, static_cast<std::uint64_t>(i)));
    return out;
  };
  EXPECT_EQ(picks(7), picks(7));
  EXPECT_NE(picks(7), picks(8));
}

TEST(selector, temperature_samples_cheaper_workers_more_often_but_not_always) {
  router_config config;
  config.router_temperature = 0.5;
  // Costs 10, 15 and 20: normalized 0, 0.5, 1 -> weights 1, e^-1, e^-2.
  const std::vector<worker_candidate> workers{{0, 10, 0, 0}, {1, 5, 0, 0}, {2, 0, 0, 0}};
  const auto counts = histogram(workers, config, 30000);
  const double total = 1 + std::exp(-1.0) + std::exp(-2.0);
  EXPECT_NEAR(counts.at(0) / 30000.0, 1 / total, 0.02);
  EXPECT_NEAR(counts.at(1) / 30000.0, std::exp(-1.0) / total, 0.02);
  EXPECT_NEAR(counts.at(2) / 30000.0, std::exp(-2.0) / total, 0.02);
}

TEST(selector, temperature_with_equal_costs_is_uniform) {
  router_config config;
  config.router_temperature = 1.0;
  const std::vector<worker_candidate> workers{{0, 1, 0, 0}, {1, 1, 0, 0}};
  const auto counts = histogram(workers, config, 20000);
  EXPECT_NEAR(counts.at(0), 10000, 400);
}

TEST(selector, round_robin_follows_the_ticket) {
  selector_rng rng(1);
  const std::vector<worker_candidate> workers{{7, 0, 0, 0}, {8, 0, 0, 0}, {9, 0, 0, 0}};
  for (std::uint64_t ticket = 0; ticket < 9; ++ticket)
    EXPECT_EQ(pick(workers, mode(router_mode::round_robin), 160, rng, ticket), 7 + ticket % 3);
}

TEST(selector, random_covers_every_worker_evenly) {
  const std::vector<worker_candidate> workers{{0, 9, 0, 0}, {1, 0, 999, 9}, {2, 0, 0, 0}};
  const auto counts = histogram(workers, mode(router_mode::random), 30000);
  for (worker_id w = 0; w < 3; ++w) EXPECT_NEAR(counts.at(w), 10000, 500) << w;
}

TEST(selector, power_of_two_never_picks_the_most_loaded_of_three) {
  const std::vector<worker_candidate> workers{{0, 0, 0, 1}, {1, 0, 0, 2}, {2, 0, 0, 50}};
  const auto counts = histogram(workers, mode(router_mode::power_of_two), 9000);
  EXPECT_EQ(counts.count(2), 0u);
  // Worker 0 wins both pairs it appears in (2 of 3 pairs), worker 1 one of 3.
  EXPECT_NEAR(counts.at(0), 6000, 300);
  EXPECT_NEAR(counts.at(1), 3000, 300);
}

TEST(selector, power_of_two_with_one_worker_picks_it) {
  selector_rng rng(1);
  EXPECT_EQ(pick({{5, 0, 0, 0}}, mode(router_mode::power_of_two), 16, rng), 5u);
}

TEST(selector, least_loaded_picks_the_lowest_booked_load_and_ignores_overlap) {
  selector_rng rng(1);
  const std::vector<worker_candidate> workers{{0, 50, 160, 0}, {1, 0, 16, 3}, {2, 0, 0, 5}};
  for (int i = 0; i < 50; ++i) EXPECT_EQ(pick(workers, mode(router_mode::least_loaded), 160, rng), 1u);
}

}  // namespace
}  // namespace kvr
