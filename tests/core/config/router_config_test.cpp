#include "core/config/router_config.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kvr {
namespace {

TEST(router_config, defaults_match_the_documented_values) {
  const router_config config;
  EXPECT_EQ(config.mode, router_mode::kv);
  EXPECT_EQ(config.overlap_score_credit, 1.0);
  EXPECT_EQ(config.prefill_load_scale, 1.0);
  EXPECT_EQ(config.router_temperature, 0.0);
  EXPECT_TRUE(config.use_kv_events);
  EXPECT_TRUE(config.track_active_blocks);
  EXPECT_EQ(config.approx_ttl_secs, 120u);
  EXPECT_EQ(config.max_index_blocks, 1u << 20);
  EXPECT_EQ(config.block_size, 16u);
  EXPECT_TRUE(validate(config));
}

TEST(router_config, every_mode_round_trips_through_its_name) {
  for (router_mode mode : {router_mode::kv, router_mode::round_robin, router_mode::random, router_mode::power_of_two,
                           router_mode::least_loaded})
    EXPECT_EQ(parse_router_mode(to_string(mode)), mode);
  EXPECT_EQ(parse_router_mode("round_robin"), std::nullopt);
}

TEST(router_config, the_load_aware_preset_is_kv_mode_without_credit_or_events) {
  router_config base;
  base.router_temperature = 0.5;
  const router_config preset = load_aware_preset(base);
  EXPECT_EQ(preset.mode, router_mode::kv);
  EXPECT_EQ(preset.overlap_score_credit, 0.0);
  EXPECT_FALSE(preset.use_kv_events);
  EXPECT_EQ(preset.router_temperature, 0.5);
  EXPECT_FALSE(uses_prefix_overlap(preset));
  EXPECT_FALSE(should_subscribe_to_kv_events(preset));
}

struct invalid_case {
  const char* knob;
  const char* value;
  const char* message;
};

TEST(router_config, only_round_robin_and_random_decide_without_loads_or_the_index) {
  for (router_mode mode : {router_mode::round_robin, router_mode::random}) {
    router_config config;
    config.mode = mode;
    EXPECT_TRUE(decides_without_state(config)) << to_string(mode);
  }
  for (router_mode mode : {router_mode::kv, router_mode::power_of_two, router_mode::least_loaded}) {
    router_config config;
    config.mode = mode;
    EXPECT_FALSE(decides_without_state(config)) << to_string(mode);
  }
  EXPECT_FALSE(decides_without_state(load_aware_preset()));
  router_config queued;
  queued.mode = router_mode::round_robin;
  queued.busy_threshold = 1.5;
  EXPECT_FALSE(decides_without_state(queued)) << "a queue needs the scorer's bookings";
}

TEST(router_config, admission_knobs_retune_in_place) {
  const router_config running;
  router_config next = running;
  next.busy_threshold = 2;
  next.max_num_batched_tokens = 2048;
  next.queue_size = 10;
  next.queue_timeout_secs = 5;
  next.queue_age_boost_secs = 1;
  EXPECT_TRUE(retunable_in_place(running, next));
  EXPECT_TRUE(queues_when_busy(next));
  EXPECT_FALSE(queues_when_busy(running));
}

TEST(router_config, validation_names_the_knob_and_the_bad_value) {
  const invalid_case cases[] = {
      {"overlap_score_credit", "-0.5", "overlap_score_credit must be a finite number >= 0 (got -0.5)"},
      {"router_temperature", "-1", "router_temperature must be a finite number >= 0 (got -1)"},
      {"prefill_load_scale", "-2", "prefill_load_scale must be a finite number >= 0 (got -2)"},
      {"block_size", "0", "block_size must be at least 1 token (got 0)"},
      {"max_index_blocks", "0", "max_index_blocks must be at least 1 (got 0)"},
      {"busy_threshold", "-1", "busy_threshold must be a finite number >= 0 (got -1)"},
      {"max_num_batched_tokens", "0", "max_num_batched_tokens must be at least 1 token (got 0)"},
      {"queue_size", "0", "queue_size must be at least 1 (got 0); busy_threshold 0 turns the queue off"},
      {"queue_timeout_secs", "0", "queue_timeout_secs must be at least 1 (got 0)"},
      {"queue_age_boost_secs", "0", "queue_age_boost_secs must be at least 1 (got 0)"},
  };
  for (const invalid_case& c : cases) {
    router_config config;
    ASSERT_TRUE(set_knob(config, c.knob, c.value)) << c.knob;
    auto result = validate(config);
    ASSERT_FALSE(result) << c.knob;
    EXPECT_EQ(result.error().message, c.message);
  }
}

TEST(router_config, set_knob_rejects_unknown_modes_keys_and_unparsable_values) {
  router_config config;
  EXPECT_EQ(set_knob(config, "router_mode", "fastest").error().message,
            "unknown router_mode \"fastest\" (expected kv, round-robin, random, power-of-two or least-loaded)");
  EXPECT_EQ(set_knob(config, "overlap_credit", "1").error().message, "unknown router config key \"overlap_credit\"");
  EXPECT_EQ(set_knob(config, "overlap_score_credit", "lots").error().message,
            "overlap_score_credit expects a number, got \"lots\"");
  EXPECT_EQ(set_knob(config, "use_kv_events", "yes").error().message, "use_kv_events expects true or false, got \"yes\"");
  EXPECT_EQ(set_knob(config, "block_size", "-4").error().message,
            "block_size expects a non-negative integer, got \"-4\"");
  EXPECT_EQ(config, router_config{});
}

TEST(router_config, json_keys_override_the_base_and_unknown_keys_are_errors) {
  auto parsed = router_config_from_json(nlohmann::json::parse(
      R"({"router_mode": "power-of-two", "overlap_score_credit": 0.25, "use_kv_events": false, "approx_ttl_secs": 30})"));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->mode, router_mode::power_of_two);
  EXPECT_EQ(parsed->overlap_score_credit, 0.25);
  EXPECT_FALSE(parsed->use_kv_events);
  EXPECT_EQ(parsed->approx_ttl_secs, 30u);
  EXPECT_EQ(parsed->prefill_load_scale, 1.0);

  EXPECT_EQ(router_config_from_json(nlohmann::json::parse(R"({"use_kv_event": false})")).error().message,
            "unknown router config key \"use_kv_event\"");
  EXPECT_EQ(router_config_from_json(nlohmann::json::parse(R"({"use_kv_events": "false"})")).error().message,
            "use_kv_events must be true or false");
  EXPECT_EQ(router_config_from_json(nlohmann::json::parse(R"({"block_size": -1})")).error().message,
            "block_size must be a non-negative integer (got -1)");
  EXPECT_FALSE(router_config_from_json(nlohmann::json::array()));
}

TEST(router_config, to_json_and_back_is_the_identity) {
  router_config config = load_aware_preset();
  config.mode = router_mode::least_loaded;
  config.router_temperature = 0.7;
  config.max_index_blocks = 12345;
  config.block_size = 64;
  auto back = router_config_from_json(to_json(config));
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, config);
}

TEST(router_config, a_card_override_replaces_the_global_config_whole) {
  router_config global;
  global.router_temperature = 0.9;
  global.prefill_load_scale = 3.0;
  router_config card;
  card.overlap_score_credit = 0.0;  // card leaves temperature and scale at their defaults
  const router_config effective = resolve_effective_config(global, card, 64);
  EXPECT_EQ(effective.overlap_score_credit, 0.0);
  EXPECT_EQ(effective.router_temperature, 0.0) << "no field merge with the global config";
  EXPECT_EQ(effective.prefill_load_scale, 1.0);
  EXPECT_EQ(effective.block_size, 64u) << "the block size is always the card's";

  const router_config inherited = resolve_effective_config(global, std::nullopt, 32);
  EXPECT_EQ(inherited.router_temperature, 0.9);
  EXPECT_EQ(inherited.block_size, 32u);
}

// The gate matrix: every mode x credit x use_kv_events x override {absent, present}.
// With the override present, the global config is the opposite corner (kv, credit 1, events on
// or round-robin), so a resolution that consulted the global config would be caught.
TEST(router_config, the_gate_predicates_follow_the_effective_config_over_the_full_matrix) {
  const router_mode modes[] = {router_mode::kv, router_mode::round_robin, router_mode::random,
                               router_mode::power_of_two, router_mode::least_loaded};
  int rows = 0;
  for (router_mode mode : modes)
    for (double credit : {0.0, 0.5, 1.0, 2.0})
      for (bool events : {true, false})
        for (bool override_present : {false, true}) {
          router_config tested;
          tested.mode = mode;
          tested.overlap_score_credit = credit;
          tested.use_kv_events = events;

          router_config global = tested;
          std::optional<router_config> card;
          if (override_present) {
            card = tested;
            global = router_config{};  // kv, credit 1, events on
            if (mode == router_mode::kv && credit > 0) global.mode = router_mode::round_robin;
          }
          const router_config effective = resolve_effective_config(global, card, 16);

          const bool overlap = mode == router_mode::kv && credit > 0;
          SCOPED_TRACE(::testing::Message() << to_string(mode) << " credit=" << credit << " events=" << events
                                          << " override=" << override_present);
          EXPECT_EQ(uses_prefix_overlap(effective), overlap);
          EXPECT_EQ(should_subscribe_to_kv_events(effective), overlap && events);
          if (overlap && !events) {
            EXPECT_TRUE(uses_prefix_overlap(effective)) << "approximate mode keeps overlap on";
          }
          EXPECT_TRUE(validate(effective));
          ++rows;
        }
  EXPECT_EQ(rows, 5 * 4 * 2 * 2);
}

}  // namespace
}  // namespace kvr
