#include "core/migration/answer_ledger.hpp"

#include <gtest/gtest.h>

namespace kvr {
namespace {

TEST(answer_ledger, follows_a_vllm_chat_stream_with_token_ids) {
  answer_ledger ledger;
  ledger.observe(R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700,"model":"m","prompt_token_ids":[1,2,3],)"
                 R"("choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null,"token_ids":[]}]})");
  ledger.observe(R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700,"model":"m",)"
                 R"("choices":[{"index":0,"delta":{"content":" Hello"},"logprobs":null,"finish_reason":null,"token_ids":[9707]}]})");
  ledger.observe(R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700,"model":"m",)"
                 R"("choices":[{"index":0,"delta":{"content":" world"},"finish_reason":null,"token_ids":[1879,0]}]})");
  EXPECT_TRUE(ledger.chat());
  EXPECT_EQ(ledger.id(), "chatcmpl-1");
  EXPECT_EQ(ledger.created(), 1700);
  EXPECT_EQ(ledger.model(), "m");
  EXPECT_TRUE(ledger.role_sent());
  EXPECT_EQ(ledger.text(), " Hello world");
  EXPECT_EQ(ledger.prompt_ids(), (std::vector<std::uint32_t>{1, 2, 3}));
  EXPECT_EQ(ledger.generated_ids(), (std::vector<std::uint32_t>{9707, 1879, 0}));
  EXPECT_TRUE(ledger.ids_complete());
  EXPECT_EQ(ledger.token_chunks(), 2u);
  EXPECT_FALSE(ledger.finish_reason());
  ledger.observe(R"({"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"stop","token_ids":[]}]})");
  ledger.observe(R"({"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3}})");
  ledger.observe("[DONE]");
  EXPECT_EQ(ledger.finish_reason(), "stop");
  EXPECT_TRUE(ledger.usage_seen());
  EXPECT_TRUE(ledger.done());
}

TEST(answer_ledger, a_completion_stream_reports_its_prompt_ids_on_the_choice) {
  answer_ledger ledger;
  ledger.observe(R"({"id":"cmpl-2","object":"text_completion","created":5,"model":"m",)"
                 R"("choices":[{"index":0,"text":"","prompt_token_ids":[4,5],"token_ids":null}]})");
  ledger.observe(R"({"id":"cmpl-2","object":"text_completion","choices":[{"index":0,"text":" a","token_ids":[6]}]})");
  EXPECT_FALSE(ledger.chat());
  EXPECT_EQ(ledger.prompt_ids(), (std::vector<std::uint32_t>{4, 5}));
  EXPECT_EQ(ledger.generated_ids(), (std::vector<std::uint32_t>{6}));
  EXPECT_EQ(ledger.text(), " a");
  EXPECT_TRUE(ledger.ids_complete());
}

TEST(answer_ledger, text_without_its_ids_tool_calls_and_errors_are_noticed) {
  answer_ledger without_ids;
  without_ids.observe(R"({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"x"}}]})");
  EXPECT_FALSE(without_ids.ids_complete());

  answer_ledger tool;
  tool.observe(R"({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0}]}}]})");
  EXPECT_TRUE(tool.tool_call_started());

  answer_ledger failed;
  failed.observe(R"({"error":{"message":"engine dead","code":500}})");
  EXPECT_TRUE(failed.engine_error());

  answer_ledger garbled;
  garbled.observe("{not json");
  EXPECT_TRUE(garbled.unreadable());

  answer_ledger other_choice;
  other_choice.observe(R"({"id":"c","object":"text_completion","choices":[{"index":1,"text":"no","token_ids":[1]}]})");
  EXPECT_TRUE(other_choice.text().empty()) << "only choice 0 is followed";
}

/// The ledger reads events without building a tree; it must read them as the tree would.
TEST(answer_ledger, a_repeated_member_counts_by_its_last_value_and_ids_out_of_range_are_not_ids) {
  answer_ledger ledger;
  ledger.observe(R"({"id":"a","id":"b","object":"text_completion","choices":[{"index":1,"index":0,"text":"x","token_ids":[7]}]})");
  EXPECT_EQ(ledger.id(), "b");
  EXPECT_EQ(ledger.text(), "x");
  EXPECT_EQ(ledger.generated_ids(), (std::vector<std::uint32_t>{7}));
  ledger.observe(R"({"choices":[{"index":0,"text":"y","token_ids":[4294967296]}]})");
  EXPECT_FALSE(ledger.ids_complete());
  answer_ledger negative;
  negative.observe(R"({"choices":[{"index":0,"text":"y","token_ids":[-1]}]})");
  EXPECT_FALSE(negative.ids_complete());
  answer_ledger huge;
  huge.observe(R"({"choices":[{"index":0,"text":"y","token_ids":[123456789012345678901234567890]}]})");
  EXPECT_TRUE(huge.unreadable()) << "past 64 bits: not followed";
}

}  // namespace
}  // namespace kvr
