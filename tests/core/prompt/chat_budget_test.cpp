#include "core/prompt/chat_budget.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace kvr {
namespace {

tokenizer& qwen3() {
  static tokenizer loaded = *tokenizer::load(std::string(KVR_TOKENIZER_DIR) + "/qwen3/tokenizer.json");
  return loaded;
}

TEST(chat_budget, qwen3s_template_costs_every_message_its_role_markers) {
  auto chat = chat_template::load(std::string(KVR_TOKENIZER_DIR) + "/qwen3/tokenizer_config.json");
  ASSERT_TRUE(chat) << chat.error();
  // <|im_start|>, the role, "\n", <|im_end|>, "\n": 5 tokens even when the content is empty.
  EXPECT_EQ(probe_tokens_per_message(&*chat, qwen3()), 5u);
}

TEST(chat_budget, a_template_that_keeps_only_the_last_message_probes_no_bound) {
  auto chat = chat_template::from_source("{{ messages[-1].role }}: {{ messages[-1].content }}");
  ASSERT_TRUE(chat);
  EXPECT_EQ(probe_tokens_per_message(&*chat, qwen3()), 0u);
  auto refusing = chat_template::from_source("{{ raise_exception('no') }}");
  ASSERT_TRUE(refusing);
  EXPECT_EQ(probe_tokens_per_message(&*refusing, qwen3()), 0u);
}

TEST(chat_budget, the_plain_fallback_costs_at_least_its_role_and_separators) {
  EXPECT_GE(probe_tokens_per_message(nullptr, qwen3()), 2u);  // "user: \n" is never fewer than two
}

TEST(chat_budget, only_user_and_assistant_messages_count_toward_the_lower_bound) {
  request_parser parser;
  std::string body = R"({"model": "m", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": ""},
                         {"role": "assistant", "content": ""}, {"role": "tool", "content": ""}]})";
  const std::size_t size = body.size();
  body.reserve(size + request_parser::padding);
  auto request = parser.parse(api_endpoint::chat_completions, std::string_view(body.data(), size), body.capacity());
  ASSERT_TRUE(request) << request.error().message;
  EXPECT_EQ(chat_tokens_at_least(request->messages, 5), 10u);
  EXPECT_EQ(chat_tokens_at_least(request->messages, 0), 0u);
}

}  // namespace
}  // namespace kvr
