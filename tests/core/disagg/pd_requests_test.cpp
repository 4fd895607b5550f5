#include "core/disagg/pd_requests.hpp"

#include <array>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kvr {
namespace {

using json = nlohmann::json;

TEST(pd_requests, the_vllm_prefill_leg_asks_for_one_token_without_a_stream_and_a_remote_decode) {
  const std::string body =
      R"({"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},)"
      R"("max_tokens":300,"min_tokens":10,"temperature":0.7})";
  const auto out = vllm_prefill_body(body);
  ASSERT_TRUE(out) << out.error();
  const json leg = json::parse(*out);
  EXPECT_EQ(leg["stream"], false);
  EXPECT_EQ(leg["max_tokens"], 1);
  EXPECT_FALSE(leg.contains("stream_options"));
  EXPECT_FALSE(leg.contains("min_tokens"));
  EXPECT_FALSE(leg.contains("max_completion_tokens")) << "added only where the client gave it";
  EXPECT_EQ(leg["temperature"], 0.7);
  EXPECT_EQ(leg["messages"], json::parse(body)["messages"]);
  EXPECT_EQ(leg["kv_transfer_params"], json::parse(R"({"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,)"
                                                   R"("remote_block_ids":null,"remote_host":null,"remote_port":null})"));
}

TEST(pd_requests, max_completion_tokens_is_cut_to_one_where_the_client_gave_it) {
  const auto out = vllm_prefill_body(R"({"model":"m","max_completion_tokens":99})");
  ASSERT_TRUE(out);
  EXPECT_EQ(json::parse(*out)["max_completion_tokens"], 1);
  EXPECT_EQ(json::parse(*out)["max_tokens"], 1);
}

TEST(pd_requests, the_vllm_decode_leg_is_the_clients_body_plus_the_prefill_params) {
  const std::string body = R"({"model":"m","prompt":"x","stream":true,"max_tokens":7})";
  const auto out = vllm_decode_body(body, R"({"remote_host":"10.0.0.1","remote_block_ids":[1,2]})");
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, R"({"model":"m","prompt":"x","stream":true,"max_tokens":7,"kv_transfer_params":{"remote_host":"10.0.0.1","remote_block_ids":[1,2]}})");
}

TEST(pd_requests, transfer_params_come_from_the_top_level_of_the_prefill_answer) {
  const auto params = kv_transfer_params_of(
      R"({"id":"x","choices":[{"text":"a","kv_transfer_params":{"no":1}}],"kv_transfer_params":{"remote_engine_id":"e1","remote_port":5600}})");
  ASSERT_TRUE(params);
  EXPECT_EQ(json::parse(*params), json::parse(R"({"remote_engine_id":"e1","remote_port":5600})"));
}

TEST(pd_requests, a_prefill_answer_without_usable_params_says_what_is_wrong) {
  EXPECT_EQ(kv_transfer_params_of(R"({"choices":[]})").error(), transfer_params_error::missing);
  EXPECT_EQ(kv_transfer_params_of(R"({"kv_transfer_params":null})").error(), transfer_params_error::missing);
  EXPECT_EQ(kv_transfer_params_of(R"({"kv_transfer_params":[1]})").error(), transfer_params_error::not_an_object);
  EXPECT_EQ(kv_transfer_params_of("<html>bad gateway</html>").error(), transfer_params_error::not_json);
  EXPECT_EQ(kv_transfer_params_of(std::string(100000, '[')).error(), transfer_params_error::not_json);
}

TEST(pd_requests, sglang_legs_carry_the_bootstrap_address_and_room) {
  const std::array<std::uint64_t, 1> room{{(std::uint64_t{1} << 62) + 5}};
  const auto out = sglang_body(R"({"model":"m","text":"hi"})", "10.0.0.7", 8998, room);
  ASSERT_TRUE(out);
  const json leg = json::parse(*out);
  EXPECT_EQ(leg["bootstrap_host"], "10.0.0.7");
  EXPECT_EQ(leg["bootstrap_port"], 8998);
  EXPECT_EQ(leg["bootstrap_room"], room[0]);
  EXPECT_EQ(leg["text"], "hi");
}

TEST(pd_requests, a_batched_generate_gets_one_room_per_prompt) {
  const std::string body = R"({"text":["a","b","c"]})";
  ASSERT_EQ(prompts_in(body), 3u);
  const std::array<std::uint64_t, 3> rooms{{1, 2, 3}};
  const json leg = json::parse(*sglang_body(body, "h", 9000, rooms));
  EXPECT_EQ(leg["bootstrap_room"], json::parse("[1,2,3]"));
  EXPECT_EQ(leg["bootstrap_host"], json::parse(R"(["h","h","h"])"));
  EXPECT_EQ(leg["bootstrap_port"], json::parse("[9000,9000,9000]"));
  EXPECT_EQ(prompts_in(R"({"input_ids":[1,2,3]})"), 1u) << "a list of ids is one prompt";
  EXPECT_EQ(prompts_in(R"({"input_ids":[[1],[2]]})"), 2u);
  EXPECT_EQ(prompts_in(R"({"messages":[]})"), 1u);
}

TEST(pd_requests, several_choices_are_told_by_n_or_best_of) {
  EXPECT_TRUE(asks_for_several_choices(R"({"n":2})"));
  EXPECT_TRUE(asks_for_several_choices(R"({"best_of":3,"n":1})"));
  EXPECT_FALSE(asks_for_several_choices(R"({"n":1})"));
  EXPECT_FALSE(asks_for_several_choices(R"({"m":{"n":4}})"));
}

}  // namespace
}  // namespace kvr
