#include "core/config/router_file.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/core/test_files.hpp"

namespace kvr {
namespace {

using kvr::testing::read_file;

std::string error_of(std::string_view text) {
  auto file = parse_router_file(text);
  return file ? std::string("(parsed)") : file.error().message;
}

TEST(router_file, the_documented_example_parses_with_every_field) {
  auto file = parse_router_file(read_file(std::string(KVR_TEST_DATA_DIR) + "/../../docs/router.example.json"));
  ASSERT_TRUE(file) << file.error().message;
  ASSERT_EQ(file->sets.size(), 1u);
  const worker_set_card& card = file->sets[0];
  EXPECT_EQ(card.name, "qwen-a");
  EXPECT_EQ(card.model, "qwen3");
  EXPECT_EQ(card.block_size, 16u);
  EXPECT_EQ(card.tokenizer, "path/to/tokenizer.json");
  EXPECT_EQ(card.tokenizer_config, "path/to/tokenizer_config.json");
  ASSERT_TRUE(card.multimodal);
  EXPECT_EQ(card.multimodal->image_token_id, 151655u);
  EXPECT_EQ(card.multimodal->rule, "qwen2-vl");
  EXPECT_EQ(card.multimodal->patch_size, 14u);
  EXPECT_EQ(card.multimodal->merge_size, 2u);
  ASSERT_EQ(card.workers.size(), 1u);
  EXPECT_EQ(card.workers[0], (worker_spec{"w0", "http://127.0.0.1:8001", "tcp://127.0.0.1:5557", "tcp://127.0.0.1:5600", "", 1}));
  ASSERT_TRUE(card.router_config_override);
  EXPECT_EQ(card.router_config_override->overlap_score_credit, 0.0);
  EXPECT_TRUE(file->router.use_kv_events);

  const router_config effective = effective_config(*file, card);
  EXPECT_FALSE(uses_prefix_overlap(effective));
  EXPECT_FALSE(effective.use_kv_events);
  EXPECT_EQ(effective.block_size, 16u);
}

TEST(router_file, explain_reports_each_sets_effective_config_and_gate) {
  auto file = parse_router_file(R"({
    "router": {"router_mode": "kv", "overlap_score_credit": 1.0},
    "worker_sets": [
      {"name": "a", "model": "ma", "block_size": 64, "workers": [{"url": "http://h:1"}]},
      {"name": "b", "model": "mb", "workers": [{"url": "http://h:2"}], "router_config": {"use_kv_events": false}},
      {"name": "c", "model": "mc", "workers": [{"url": "http://h:3"}], "router_config": {"router_mode": "random"}}]})");
  ASSERT_TRUE(file) << file.error().message;
  const auto sets = explain(*file)["sets"];
  ASSERT_EQ(sets.size(), 3u);
  EXPECT_EQ(sets[0]["effective_router_config"]["block_size"], 64);
  EXPECT_TRUE(sets[0]["uses_prefix_overlap"].get<bool>());
  EXPECT_TRUE(sets[0]["kv_events_subscribed"].get<bool>());
  EXPECT_TRUE(sets[1]["uses_prefix_overlap"].get<bool>()) << "approximate mode keeps overlap";
  EXPECT_FALSE(sets[1]["kv_events_subscribed"].get<bool>());
  EXPECT_TRUE(sets[1]["mm_routing_enabled"].get<bool>());
  EXPECT_FALSE(sets[2]["uses_prefix_overlap"].get<bool>());
  EXPECT_FALSE(sets[2]["mm_routing_enabled"].get<bool>());
  EXPECT_EQ(sets[2]["effective_router_config"]["router_mode"], "random");
}

TEST(router_file, mistakes_are_refused_with_the_set_and_key_named) {
  const std::string worker = R"("workers": [{"url": "http://h:1"}])";
  EXPECT_EQ(error_of("{"), "the config file is not valid JSON");
  EXPECT_EQ(error_of(R"({"worker_set": []})"), "config file: unknown key \"worker_set\"");
  EXPECT_EQ(error_of(R"({"worker_sets": [{"model": "m", )" + worker + "}]}"), "worker_sets[0]: \"name\" is required");
  EXPECT_EQ(error_of(R"({"worker_sets": [{"name": "a", "modle": "m", )" + worker + "}]}"),
            "worker set \"a\": unknown key \"modle\"");
  EXPECT_EQ(error_of(R"({"worker_sets": [{"name": "a", "model": "m", "workers": []}]})"),
            "worker set \"a\": \"workers\" must be a non-empty array");
  EXPECT_EQ(error_of(R"({"worker_sets": [{"name": "a", "model": "m", "workers": [{"url": "h:1"}]}]})"),
            "worker set \"a\" worker 0: worker \"h:1,dp_size=1\": must start with the worker's http:// or https:// URL");
  EXPECT_EQ(error_of(R"({"worker_sets": [{"name": "a", "model": "m", "workers": [{"url": "http://h:1", "kv_events": "h:5557"}]}]})"),
            "worker set \"a\" worker 0: worker \"http://h:1,kv_events=h:5557,dp_size=1\": kv_events must be a ZeroMQ endpoint such as tcp://host:5557");
  EXPECT_EQ(error_of(R"({"worker_sets": [{"name": "a", "model": "m", "workers": [{"url": "http://h:1", "id": "x"}, {"url": "http://h:2", "id": "x"}]}]})"),
            "worker set \"a\": two workers have the id \"x\"");
  EXPECT_EQ(error_of(R"({"worker_sets": [{"name": "a", "model": "m", )" + worker + R"(}, {"name": "b", "model": "m", )" + worker + "}]}"),
            "two worker sets serve the model \"m\"");
  EXPECT_EQ(error_of(R"({"worker_sets": [{"name": "a", "model": "m", "block_size": 0, )" + worker + "}]}"),
            "worker set \"a\": block_size must be at least 1 token (got 0)");
  EXPECT_EQ(error_of(R"({"worker_sets": [{"name": "a", "model": "m", "router_config": {"block_size": 8}, )" + worker + "}]}"),
            "worker set \"a\": block_size belongs to the card, not to its router_config");
  EXPECT_EQ(error_of(R"({"worker_sets": [{"name": "a", "model": "m", "router_config": {"router_temperature": -1}, )" + worker + "}]}"),
            "worker set \"a\": router_temperature must be a finite number >= 0 (got -1)");
  EXPECT_EQ(error_of(R"({"worker_sets": [{"name": "a", "model": "m", "multimodal": {"image_token_id": 5, "token_count": {"rule": "llava"}}, )" + worker + "}]}"),
            "worker set \"a\".token_count: unknown rule \"llava\" (expected qwen2-vl or fixed)");
  EXPECT_EQ(error_of(R"({"router": {"router_mode": "fast"}, "worker_sets": []})"),
            "router: unknown router_mode \"fast\" (expected kv, round-robin, random, power-of-two or least-loaded)");
}

TEST(router_file, a_card_override_replaces_the_global_config_whole) {
  auto file = parse_router_file(R"({
    "router": {"router_temperature": 0.7, "prefill_load_scale": 2.0},
    "worker_sets": [{"name": "a", "model": "m", "workers": [{"url": "http://h:1"}], "router_config": {"overlap_score_credit": 0.5}}]})");
  ASSERT_TRUE(file);
  const router_config effective = effective_config(*file, file->sets[0]);
  EXPECT_EQ(effective.overlap_score_credit, 0.5);
  EXPECT_EQ(effective.router_temperature, 0.0);
  EXPECT_EQ(effective.prefill_load_scale, 1.0);
}

TEST(router_file, a_reload_restarts_only_sets_whose_card_or_effective_config_changed) {
  const std::string a = R"({"name": "a", "model": "ma", "workers": [{"url": "http://h:1"}]})";
  const std::string b = R"({"name": "b", "model": "mb", "workers": [{"url": "http://h:2"}], "router_config": {"router_mode": "random"}})";
  const std::string b2 = R"({"name": "b", "model": "mb", "workers": [{"url": "http://h:2"}, {"url": "http://h:3"}], "router_config": {"router_mode": "random"}})";
  const std::string c = R"({"name": "c", "model": "mc", "workers": [{"url": "http://h:4"}]})";
  auto current = parse_router_file(R"({"worker_sets": [)" + a + "," + b + "]}");
  auto next = parse_router_file(R"({"worker_sets": [)" + a + "," + b2 + "," + c + "]}");
  ASSERT_TRUE(current && next);
  const reload_plan plan = plan_reload(*current, *next);
  EXPECT_EQ(plan.keep, std::vector<std::string>{"a"});
  EXPECT_EQ(plan.start, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(plan.stop, std::vector<std::string>{"b"});

  // A new global config changes the sets that inherit it, not the one with an override.
  auto global_changed = parse_router_file(R"({"router": {"max_index_blocks": 5000}, "worker_sets": [)" + a + "," + b + "]}");
  ASSERT_TRUE(global_changed);
  const reload_plan second = plan_reload(*current, *global_changed);
  EXPECT_EQ(second.keep, std::vector<std::string>{"b"});
  EXPECT_EQ(second.start, std::vector<std::string>{"a"});

  auto removed = parse_router_file(R"({"worker_sets": [)" + b + "]}");
  EXPECT_EQ(plan_reload(*current, *removed).stop, std::vector<std::string>{"a"});
}

TEST(router_file, a_reload_that_changes_only_cost_weights_retunes_in_place) {
  const std::string set = R"({"name": "a", "model": "ma", "workers": [{"url": "http://h:1"}]})";
  auto current = parse_router_file(R"({"router": {"router_temperature": 0.0}, "worker_sets": [)" + set + "]}");
  ASSERT_TRUE(current);
  for (const std::string knobs : {R"("router_temperature": 0.5)", R"("prefill_load_scale": 2)", R"("overlap_score_credit": 0.5)"}) {
    auto next = parse_router_file(R"({"router": {)" + knobs + R"(}, "worker_sets": [)" + set + "]}");
    ASSERT_TRUE(next) << knobs;
    const reload_plan plan = plan_reload(*current, *next);
    EXPECT_EQ(plan.retune, std::vector<std::string>{"a"}) << knobs;
    EXPECT_TRUE(plan.start.empty() && plan.stop.empty()) << knobs;
  }
  // The same through the card's own router_config.
  auto card_override = parse_router_file(R"({"worker_sets": [{"name": "a", "model": "ma", "workers": [{"url": "http://h:1"}],
                                             "router_config": {"router_temperature": 0.7}}]})");
  ASSERT_TRUE(card_override);
  EXPECT_EQ(plan_reload(*current, *card_override).retune, std::vector<std::string>{"a"});
  // Anything that changes what the set runs or holds rebuilds it.
  for (const std::string knobs : {R"("overlap_score_credit": 0)", R"("router_mode": "round-robin")", R"("use_kv_events": false)",
                                  R"("max_index_blocks": 1000)", R"("track_active_blocks": false)", R"("approx_ttl_secs": 5)"}) {
    auto next = parse_router_file(R"({"router": {)" + knobs + R"(}, "worker_sets": [)" + set + "]}");
    ASSERT_TRUE(next) << knobs;
    const reload_plan plan = plan_reload(*current, *next);
    EXPECT_TRUE(plan.retune.empty()) << knobs;
    EXPECT_EQ(plan.start, std::vector<std::string>{"a"}) << knobs;
  }
}

}  // namespace
}  // namespace kvr

namespace kvr {
namespace {

constexpr std::string_view one_set = R"("worker_sets": [{"name": "a", "model": "m", "workers": [{"url": "http://127.0.0.1:8001"}]}])";

TEST(router_file, replica_sync_keys_sit_at_the_top_level_and_are_optional) {
  auto plain = parse_router_file("{" + std::string(one_set) + "}");
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_EQ(plain->replicas, replica_file_options{});
  auto file = parse_router_file(R"({"nats": "nats://n1:4222,nats://n2:4222", "replica_id": "r7", "nats_subject_prefix": "prod.kvr",
                                    "replica_warmup_ms": 500, )" + std::string(one_set) + "}");
  ASSERT_TRUE(file) << file.error().message;
  EXPECT_EQ(file->replicas.nats, "nats://n1:4222,nats://n2:4222");
  EXPECT_EQ(file->replicas.replica_id, "r7");
  EXPECT_EQ(file->replicas.nats_subject_prefix, "prod.kvr");
  EXPECT_EQ(file->replicas.replica_warmup_ms, 500u);
}

TEST(router_file, replica_sync_keys_of_the_wrong_type_are_refused_by_name) {
  for (const char* bad : {R"("nats": 4222)", R"("nats": "")", R"("replica_id": ["r1"])", R"("nats_subject_prefix": null)",
                          R"("replica_warmup_ms": -1)", R"("replica_warmup_ms": "2000")"}) {
    const std::string error = error_of("{" + std::string(bad) + ", " + std::string(one_set) + "}");
    const std::string key = std::string(bad).substr(1, std::string(bad).find('"', 1) - 1);
    EXPECT_NE(error.find(key), std::string::npos) << bad << " -> " << error;
  }
}

}  // namespace
}  // namespace kvr
