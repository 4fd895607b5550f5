#include "core/loadgen/workload.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/loadgen/stats.hpp"

namespace kvr::loadgen {
namespace {

TEST(mooncake_trace, requests_sharing_hash_ids_share_exactly_those_prompt_blocks) {
  const std::string trace =
      R"({"timestamp": 0, "input_length": 10, "output_length": 3, "hash_ids": [7, 8, 9]})" "\n"
      R"({"timestamp": 500, "input_length": 9, "output_length": 1, "hash_ids": [7, 8, 5]})" "\n";
  auto requests = mooncake_trace(trace, {.block_tokens = 4, .speedup = 2.0});
  ASSERT_TRUE(requests) << requests.error();
  ASSERT_EQ(requests->size(), 2u);
  const auto& a = (*requests)[0].prompt;
  const auto& b = (*requests)[1].prompt;
  ASSERT_EQ(a.size(), 10u);  // 4 + 4 + 2: the last block is cut to input_length
  ASSERT_EQ(b.size(), 9u);
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + 8, b.begin()));
  EXPECT_NE(a[8], b[8]);
  EXPECT_EQ((*requests)[0].max_tokens, 3u);
  EXPECT_DOUBLE_EQ((*requests)[1].arrival_s, 0.25);  // 500 ms / speedup 2
}

TEST(mooncake_trace, a_malformed_line_is_an_error_naming_it) {
  EXPECT_EQ(mooncake_trace("{\"timestamp\": 0}\n", {}).error(), "line 1: needs input_length");
  EXPECT_EQ(mooncake_trace("\n[1]\n", {}).error(), "line 2: not a JSON object");
}

TEST(mooncake_trace, the_sample_traces_reuse_ceiling_is_the_share_of_blocks_seen_before) {
  std::ifstream in(std::string(KVR_SOURCE_DIR) + "/../shared/testdata/traces/mooncake_synthetic_trace.jsonl");
  if (!in) GTEST_SKIP() << "the shared sample trace is not next to this checkout";
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NEAR(*trace_reuse_ceiling(text.str()), 0.6396, 0.0001);
  EXPECT_DOUBLE_EQ(*trace_reuse_ceiling("{\"hash_ids\": [1, 2]}\n{\"hash_ids\": [1, 3]}\n"), 0.25);
}

TEST(shared_prefix, groups_share_their_system_prompt_and_turns_extend_their_conversation) {
  const auto requests = shared_prefix({.groups = 2, .prompts_per_group = 3, .system_tokens = 32, .question_tokens = 8,
                                       .output_tokens = 4, .turns = 2, .seed = 1});
  ASSERT_EQ(requests.size(), 12u);
  std::size_t first_turn = 0, second_turn = 0;
  for (const auto& r : requests) (r.prompt.size() == 40 ? first_turn : second_turn) += 1;
  EXPECT_EQ(first_turn, 6u);
  EXPECT_EQ(second_turn, 6u);
  // Every second-turn prompt starts with some first-turn prompt (the conversation so far).
  for (std::size_t i = 6; i < 12; ++i) {
    bool extends = false;
    for (std::size_t j = 0; j < 6; ++j)
      extends |= std::equal(requests[j].prompt.begin(), requests[j].prompt.end(), requests[i].prompt.begin());
    EXPECT_TRUE(extends) << i;
  }
  EXPECT_EQ(shared_prefix({.seed = 5})[0].prompt, shared_prefix({.seed = 5})[0].prompt) << "seeded, reproducible";
}

TEST(poisson_arrivals, the_mean_gap_is_one_over_the_rate) {
  std::vector<request_spec> requests(20000);
  poisson_arrivals(requests, 50.0, 3);
  EXPECT_DOUBLE_EQ(requests[0].arrival_s, 0.0);
  EXPECT_NEAR(requests.back().arrival_s / (requests.size() - 1), 1.0 / 50, 0.001);
}

TEST(stats, percentiles_are_nearest_rank_and_prometheus_sums_every_label_set) {
  std::vector<double> samples;
  for (int i = 100; i >= 1; --i) samples.push_back(i);
  const summary s = summarize(samples);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_DOUBLE_EQ(s.p50, 50);
  EXPECT_DOUBLE_EQ(s.p99, 99);
  const std::string text =
      "# HELP vllm:prefix_cache_hits_total x\nvllm:prefix_cache_hits_total{engine=\"0\"} 10\n"
      "vllm:prefix_cache_hits_total{engine=\"1\"} 5.5\nvllm:prefix_cache_hits_total_other 99\n";
  EXPECT_DOUBLE_EQ(prometheus_sum(text, "vllm:prefix_cache_hits_total"), 15.5);
}

}  // namespace
}  // namespace kvr::loadgen

namespace kvr::loadgen {
namespace {

TEST(working_set, counts_each_shared_prefix_block_once) {
  shared_prefix_options options;
  options.groups = 3;
  options.prompts_per_group = 4;
  options.system_tokens = 64;    // 4 blocks of 16 per group, shared
  options.question_tokens = 32;  // 2 blocks per prompt, its own
  const auto requests = shared_prefix(options);
  EXPECT_EQ(distinct_prompt_blocks(requests, 16), 3u * 4 + 3u * 4 * 2);
  EXPECT_EQ(distinct_prompt_blocks({}, 16), 0u);
}

}  // namespace
}  // namespace kvr::loadgen

namespace kvr::loadgen {
namespace {

TEST(text_chats, a_later_turn_extends_its_conversation_and_groups_share_their_system_prompt) {
  const auto requests = text_chats({.groups = 2, .conversations_per_group = 3, .system_words = 5, .question_words = 4,
                                    .answer_words = 3, .turns = 2, .output_tokens = 7, .seed = 9});
  ASSERT_EQ(requests.size(), 12u) << "2 groups x 3 conversations x 2 turns";
  std::vector<nlohmann::json> first, second;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    EXPECT_TRUE(requests[i].prompt.empty());
    EXPECT_EQ(requests[i].max_tokens, 7u);
    (i < 6 ? first : second).push_back(nlohmann::json::parse(requests[i].messages_json));
  }
  std::set<std::string> systems;
  for (const auto& m : first) {
    ASSERT_EQ(m.size(), 2u) << "system, question";
    EXPECT_EQ(m[0]["role"], "system");
    EXPECT_EQ(m[1]["role"], "user");
    systems.insert(m[0]["content"].get<std::string>());
  }
  EXPECT_EQ(systems.size(), 2u) << "one system prompt per group";
  for (const auto& m : second) {
    ASSERT_EQ(m.size(), 4u) << "system, question, answer, question";
    EXPECT_EQ(m[2]["role"], "assistant");
    const std::string answer = m[2]["content"].get<std::string>();
    EXPECT_EQ(std::count(answer.begin(), answer.end(), ' '), 2) << "an answer of 3 words";
    const auto earlier = std::find_if(first.begin(), first.end(), [&](const nlohmann::json& f) { return f[1] == m[1]; });
    ASSERT_NE(earlier, first.end()) << "the second turn carries its own conversation's first question";
    EXPECT_EQ((*earlier)[0], m[0]);
  }
  EXPECT_EQ(text_chats({.turns = 1, .seed = 9}).front().messages_json, text_chats({.turns = 1, .seed = 9}).front().messages_json)
      << "seeded";
}

}  // namespace
}  // namespace kvr::loadgen
