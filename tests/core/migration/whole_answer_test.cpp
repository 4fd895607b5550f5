/// A non-streamed answer streamed from its engine and gathered for the client
/// (core/migration/whole_answer), and which requests may be (whole_answer_can_be_followed).

#include "core/migration/whole_answer.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/migration/continuation.hpp"

namespace kvr {
namespace {

using json = nlohmann::json;

TEST(whole_answer, a_chat_stream_gathers_into_vllms_chat_completion) {
  whole_answer answer;
  answer.add(R"({"id":"chatcmpl-7","object":"chat.completion.chunk","created":5,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})");
  answer.add(R"({"id":"chatcmpl-7","object":"chat.completion.chunk","created":5,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]})");
  answer.add(R"({"id":"chatcmpl-7","object":"chat.completion.chunk","created":5,"model":"m","choices":[{"index":0,"delta":{"content":" the"}}]})");
  answer.add(R"({"id":"chatcmpl-7","object":"chat.completion.chunk","created":5,"model":"m","choices":[{"index":0,"delta":{"content":" cache"},"finish_reason":"stop","stop_reason":151645}]})");
  answer.add(R"({"id":"chatcmpl-7","object":"chat.completion.chunk","created":5,"model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}})");
  answer.add("[DONE]");
  EXPECT_TRUE(answer.done());
  const json body = json::parse(answer.body());
  EXPECT_EQ(body["id"], "chatcmpl-7");
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["created"], 5);
  EXPECT_EQ(body["model"], "m");
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["index"], 0);
  EXPECT_EQ(choice["message"], (json{{"role", "assistant"}, {"content", " the cache"}, {"reasoning_content", "hmm"}}));
  EXPECT_TRUE(choice["logprobs"].is_null());
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_EQ(choice["stop_reason"], 151645);
  EXPECT_FALSE(choice.contains("token_ids"));
  EXPECT_EQ(body["usage"], (json{{"prompt_tokens", 9}, {"completion_tokens", 3}, {"total_tokens", 12}}));
}

TEST(whole_answer, a_completion_stream_keeps_the_token_ids_the_client_was_sent) {
  whole_answer answer;
  answer.add(R"({"id":"cmpl-1","object":"text_completion","created":5,"model":"m","choices":[{"index":0,"text":" a","prompt_token_ids":[1,2],"token_ids":[10]}]})");
  answer.add(R"({"id":"cmpl-1","object":"text_completion","created":5,"model":"m","choices":[{"index":0,"text":" b","token_ids":[11],"finish_reason":"length","stop_reason":null}]})");
  const json body = json::parse(answer.body());
  EXPECT_EQ(body["object"], "text_completion");
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["text"], " a b");
  EXPECT_EQ(choice["prompt_token_ids"], (json{1, 2}));
  EXPECT_EQ(choice["token_ids"], (json{10, 11}));
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_TRUE(choice["stop_reason"].is_null());
  EXPECT_TRUE(body["usage"].is_null()) << "no usage came";
}

TEST(whole_answer, requests_whose_answer_events_cannot_give_are_not_followed) {
  EXPECT_TRUE(whole_answer_can_be_followed(R"({"model":"m","messages":[],"max_tokens":5,"temperature":0})"));
  EXPECT_TRUE(whole_answer_can_be_followed(R"({"messages":[],"n":1,"logprobs":false,"tools":[],"response_format":{"type":"text"}})"));
  for (const char* body : {R"({"messages":[],"tools":[{"type":"function","function":{"name":"f"}}]})",
                           R"({"prompt":"a","echo":true})", R"({"prompt":"a","n":2})", R"({"prompt":"a","best_of":3})",
                           R"({"messages":[],"logprobs":true})", R"({"prompt":"a","logprobs":2})",
                           R"({"messages":[],"top_logprobs":2})", R"({"messages":[],"response_format":{"type":"json_object"}})",
                           R"({"messages":[],"guided_json":{}})", R"({"messages":[],"structured_outputs":{"regex":"a"}})",
                           R"({"m\u0065ssages":[]})", "not json", "[1]"})
    EXPECT_FALSE(whole_answer_can_be_followed(body)) << body;
}

}  // namespace
}  // namespace kvr
