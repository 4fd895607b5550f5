#include "core/config/disaggregation.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/config/router_file.hpp"
#include "core/config/worker_spec.hpp"

namespace kvr {
namespace {

using json = nlohmann::json;

std::string card_file(const std::string& workers, const std::string& disaggregation) {
  return R"({"worker_sets":[{"name":"s","model":"m","workers":)" + workers +
         (disaggregation.empty() ? "" : R"(,"disaggregation":)" + disaggregation) + "}]}";
}

TEST(disaggregation, a_card_names_its_protocol_and_rules) {
  const auto file = parse_router_file(card_file(
      R"([{"url":"http://p:8000","role":"prefill","bootstrap_port":9001},{"url":"http://d:8000","role":"decode"}])",
      R"({"protocol":"sglang","missing_params":"fail","decode_overlap_credit":0.5,"max_local_prefill_tokens":256})"));
  ASSERT_TRUE(file) << file.error().message;
  const worker_set_card& card = file->sets.front();
  ASSERT_TRUE(card.disaggregation);
  EXPECT_EQ(*card.disaggregation, (disaggregation_card{pd_protocol::sglang, missing_params_policy::fail, 0.5, 256}));
  EXPECT_EQ(card.workers[0].role, worker_role::prefill);
  EXPECT_EQ(card.workers[0].bootstrap_port, 9001);
  EXPECT_EQ(card.workers[1].role, worker_role::decode);
  EXPECT_EQ(card.workers[1].bootstrap_port, default_bootstrap_port);
}

TEST(disaggregation, defaults_are_aggregate_on_missing_params_no_decode_credit_and_always_disaggregate) {
  const auto card = parse_disaggregation(json::parse(R"({"protocol":"vllm-nixl"})"), "set");
  ASSERT_TRUE(card);
  EXPECT_EQ(*card, disaggregation_card{});
}

TEST(disaggregation, bad_rules_are_refused_by_name) {
  for (auto [text, says] : {std::pair{R"({})", "\"protocol\" is required"},
                            std::pair{R"({"protocol":"nixl"})", "\"protocol\" must be"},
                            std::pair{R"({"protocol":"sglang","missing_params":"retry"})", "\"missing_params\" must be"},
                            std::pair{R"({"protocol":"sglang","decode_overlap_credit":-1})", "decode_overlap_credit"},
                            std::pair{R"({"protocol":"sglang","max_local_prefill_tokens":-5})", "max_local_prefill_tokens"},
                            std::pair{R"({"protocol":"sglang","timeout":5})", "unknown key \"timeout\""},
                            std::pair{R"("sglang")", "must be an object"}}) {
    const auto card = parse_disaggregation(json::parse(text), "worker set \"s\"");
    ASSERT_FALSE(card) << text;
    EXPECT_NE(card.error().message.find(says), std::string::npos) << card.error().message;
    EXPECT_NE(card.error().message.find("worker set \"s\""), std::string::npos);
  }
}

TEST(disaggregation, a_disaggregated_set_needs_both_pools_and_roles_need_a_disaggregated_set) {
  auto no_decode = parse_router_file(card_file(R"([{"url":"http://p:8000","role":"prefill"}])", R"({"protocol":"vllm-nixl"})"));
  ASSERT_FALSE(no_decode);
  EXPECT_NE(no_decode.error().message.find("needs a worker with role decode"), std::string::npos) << no_decode.error().message;
  auto no_prefill = parse_router_file(card_file(R"([{"url":"http://d:8000","role":"decode"}])", R"({"protocol":"vllm-nixl"})"));
  ASSERT_FALSE(no_prefill);
  EXPECT_NE(no_prefill.error().message.find("needs a worker with role prefill"), std::string::npos);
  auto roles_alone = parse_router_file(card_file(R"([{"url":"http://d:8000","role":"decode","id":"d"}])", ""));
  ASSERT_FALSE(roles_alone);
  EXPECT_NE(roles_alone.error().message.find("worker \"d\" has role decode, but the set is not disaggregated"), std::string::npos)
      << roles_alone.error().message;
  auto bad_role = parse_router_file(card_file(R"([{"url":"http://d:8000","role":"encode"}])", R"({"protocol":"sglang"})"));
  ASSERT_FALSE(bad_role);
  EXPECT_NE(bad_role.error().message.find("role must be prefill, decode or both"), std::string::npos);
}

TEST(disaggregation, command_line_workers_take_a_role_and_a_bootstrap_port) {
  const auto spec = parse_worker_spec("http://p:30000,role=prefill,bootstrap=8999");
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->role, worker_role::prefill);
  EXPECT_EQ(spec->bootstrap_port, 8999);
  EXPECT_FALSE(parse_worker_spec("http://p:30000,bootstrap=0"));
  EXPECT_FALSE(parse_worker_spec("http://p:30000,role=primary"));
}

TEST(disaggregation, explain_shows_the_pools_and_the_rules) {
  const auto file = parse_router_file(card_file(
      R"([{"url":"http://p:8000","id":"p","role":"prefill"},{"url":"http://b:8000","id":"b"},{"url":"http://d:8000","id":"d","role":"decode"}])",
      R"({"protocol":"vllm-nixl"})"));
  ASSERT_TRUE(file);
  const json shown = explain(*file)["sets"][0]["disaggregation"];
  EXPECT_EQ(shown["protocol"], "vllm-nixl");
  EXPECT_EQ(shown["pools"]["prefill"], json::parse(R"(["p","b"])"));
  EXPECT_EQ(shown["pools"]["decode"], json::parse(R"(["b","d"])"));
  EXPECT_TRUE(shown.contains("prefill_choice") && shown.contains("decode_choice"));
}

TEST(disaggregation, explain_names_each_sglang_prefill_worker_with_its_bootstrap_port) {
  const auto file = parse_router_file(card_file(
      R"([{"url":"http://p:8000","id":"p","role":"prefill","bootstrap_port":9001},{"url":"http://q:8000","id":"q","role":"prefill"},{"url":"http://d:8000","id":"d","role":"decode"}])",
      R"({"protocol":"sglang"})"));
  ASSERT_TRUE(file);
  const json shown = explain(*file)["sets"][0]["disaggregation"];
  EXPECT_EQ(shown["pools"]["prefill"], json::parse(R"J(["p (bootstrap port 9001)","q (bootstrap port 8998)"])J"));
  EXPECT_EQ(shown["pools"]["decode"], json::parse(R"(["d"])"));
  EXPECT_NE(shown["legs"].get<std::string>().find("at once"), std::string::npos);
}

}  // namespace
}  // namespace kvr
