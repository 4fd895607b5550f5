#include "core/prompt/api_translation.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace kvr {
namespace {

nlohmann::json messages_of(const std::optional<std::string>& chat) { return nlohmann::json::parse(*chat)["messages"]; }

TEST(api_translation, a_responses_request_becomes_its_instructions_then_its_input_messages) {
  const auto chat = responses_as_chat(R"({"model": "m", "stream": true, "instructions": "Be brief.", "input": [
      {"role": "user", "content": "Hi"},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello"}]},
      {"role": "developer", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]}]})");
  ASSERT_TRUE(chat);
  const auto parsed = nlohmann::json::parse(*chat);
  EXPECT_EQ(parsed["model"], "m");
  EXPECT_EQ(parsed["stream"], true);
  EXPECT_EQ(parsed["messages"], nlohmann::json::parse(R"([{"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}, {"role": "system", "content": "a\nb"}])"));
  EXPECT_EQ(messages_of(responses_as_chat(R"({"input": "Hello"})")), nlohmann::json::parse(R"([{"role": "user", "content": "Hello"}])"));
}

TEST(api_translation, a_messages_request_becomes_its_system_then_its_turns) {
  const auto chat = messages_as_chat(R"({"model": "m", "max_tokens": 5, "system": [{"type": "text", "text": "Be brief."}],
      "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": [{"type": "text", "text": "Hello"}]}]})");
  ASSERT_TRUE(chat);
  EXPECT_EQ(messages_of(chat), nlohmann::json::parse(R"([{"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}])"));
}

TEST(api_translation, the_system_text_comes_first_wherever_the_body_has_it_and_strings_keep_their_escapes) {
  // Anthropic's SDKs send `system` after `messages`; OpenAI's may send `instructions` after `input`.
  const auto chat = messages_as_chat(R"({"messages": [{"role": "user", "content": "caf\u00e9 \"x\""}], "model": "m",
      "system": "Be \n brief.", "stream": false, "user": "u1"})");
  ASSERT_TRUE(chat);
  const auto parsed = nlohmann::json::parse(*chat);
  EXPECT_EQ(parsed["messages"], nlohmann::json::parse(R"([{"role": "system", "content": "Be \n brief."},
      {"role": "user", "content": "caf\u00e9 \"x\""}])"));
  EXPECT_EQ(parsed["stream"], false);
  EXPECT_EQ(parsed["user"], "u1");
  EXPECT_EQ(messages_of(responses_as_chat(R"({"input": [{"role": "user", "content": [{"type": "input_text", "text": "a\tb"},
      {"type": "input_text", "text": ""}]}], "instructions": "I"})")),
            nlohmann::json::parse(R"([{"role": "system", "content": "I"}, {"role": "user", "content": "a\tb\n"}])"));
  // A body read through its own buffer (padded as the ingress reads bodies) gives the same chat.
  std::string body = R"({"model": "m", "input": "Hello"})";
  const std::size_t size = body.size();
  body.reserve(size + 64);
  EXPECT_EQ(responses_as_chat(std::string_view(body.data(), size), body.capacity()), responses_as_chat(R"({"model": "m", "input": "Hello"})"));
}

TEST(api_translation, anything_whose_rendering_is_not_certain_has_no_translation) {
  for (const char* body : {R"({"input": "x", "tools": []})", R"({"input": [{"type": "function_call_output", "output": "4"}]})",
                           R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})",
                           R"({"input": "x", "previous_response_id": "r1"})", R"({"input": 5})", R"({"model": "m"})",
                           R"([1])", R"({not json)", R"({"input": [{"role": "tool", "content": "x"}]})",
                           R"({"input": []})", R"({"input": "x", "instructions": 3})", R"({"instructions": "x"})",
                           R"({"input": [{"role": "user", "content": []}]})", R"({"input": [{"type": 1, "role": "user", "content": "x"}]})"})
    EXPECT_FALSE(responses_as_chat(body)) << body;
  for (const char* body : {R"({"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]})",
                           R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"name": "f"}]})",
                           R"({"messages": []})", R"({"system": 5, "messages": [{"role": "user", "content": "x"}]})",
                           R"({"system": "s", "messages": []})", R"({"messages": [{"role": "user", "content": [{"text": "x"}]}]})",
                           R"({"messages": [{"role": "user"}]})", R"({"messages": [{"role": "user", "content": "x"}]} trailing)",
                           R"({"messages": [{"role": 7, "content": "x"}]})"})
    EXPECT_FALSE(messages_as_chat(body)) << body;
}

}  // namespace
}  // namespace kvr
