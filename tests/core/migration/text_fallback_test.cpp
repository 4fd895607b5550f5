/// An answer whose engine reported no token ids is continued from ids kvrouter rebuilds with
/// the set's tokenizer and chat template (core/migration/text_fallback).

#include "core/migration/text_fallback.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/migration/continuation.hpp"

namespace kvr {
namespace {

using json = nlohmann::json;

const tokenizer& qwen3() {
  static const tokenizer loaded = *tokenizer::load(std::string(KVR_TOKENIZER_DIR) + "/qwen3/tokenizer.json");
  return loaded;
}
const chat_template& qwen3_chat() {
  static const chat_template chat = *chat_template::load(std::string(KVR_TOKENIZER_DIR) + "/qwen3/tokenizer_config.json");
  return chat;
}
std::vector<std::uint32_t> encoded(std::string_view text) {
  tokenizer own = qwen3().share();
  std::vector<std::uint32_t> ids;
  own.encode(text, ids);
  return ids;
}

const std::string messages = R"([{"role":"user","content":"How does a router reuse a KV cache?"}])";
const std::string chat_body = R"({"model":"m","stream":true,"max_tokens":40,"messages":)" + messages + "}";

/// A text-only engine's chat chunks (SGLang's OpenAI API): content, no token ids.
answer_ledger ledger_of(const std::vector<std::string>& pieces, std::string_view field = "content") {
  answer_ledger ledger;
  ledger.observe(json{{"id", "chatcmpl-1"}, {"object", "chat.completion.chunk"}, {"created", 1}, {"model", "m"},
                      {"choices", {{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}}}}}.dump());
  for (const std::string& piece : pieces)
    ledger.observe(json{{"id", "chatcmpl-1"}, {"object", "chat.completion.chunk"}, {"created", 1}, {"model", "m"},
                        {"choices", {{{"index", 0}, {"delta", {{field, piece}}}}}}}.dump());
  return ledger;
}

TEST(text_fallback, a_chat_answered_in_text_alone_gets_the_ids_of_its_rendered_prompt_and_of_its_text) {
  answer_ledger ledger = ledger_of({" A", " router", " sends", " each", " request"});
  ASSERT_FALSE(ledger.ids_complete());
  ASSERT_TRUE(rebuild_ids_from_text(ledger, chat_body, {&qwen3(), &qwen3_chat(), false}, 1000));
  EXPECT_EQ(ledger.prompt_ids(), encoded(*qwen3_chat().render({.messages_json = messages})));
  EXPECT_EQ(ledger.generated_ids(), encoded(" A router sends each request"));
  EXPECT_TRUE(ledger.ids_complete());
  const auto next = continue_answer(json::parse(chat_body), ledger, 0);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->carried_tokens, 5u);
  const json continued = json::parse(next->body);
  EXPECT_EQ(continued["max_tokens"], 35);
  EXPECT_EQ(continued["prompt"].size(), ledger.prompt_ids().size() + 5);
}

TEST(text_fallback, a_completion_prompt_is_tokenized_as_the_engine_does) {
  answer_ledger ledger;
  ledger.observe(R"({"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" the cache"}]})");
  ASSERT_TRUE(rebuild_ids_from_text(ledger, R"({"model":"m","prompt":"Hello, world!","max_tokens":9})", {&qwen3(), nullptr, false}, 1000));
  EXPECT_EQ(ledger.prompt_ids(), (std::vector<std::uint32_t>{9707, 11, 1879, 0}));
  EXPECT_EQ(ledger.generated_ids(), encoded(" the cache"));
  answer_ledger from_ids;
  from_ids.observe(R"({"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" the"}]})");
  ASSERT_TRUE(rebuild_ids_from_text(from_ids, R"({"prompt":[7,8,9]})", {&qwen3(), nullptr, false}, 1000));
  EXPECT_EQ(from_ids.prompt_ids(), (std::vector<std::uint32_t>{7, 8, 9}));
}

TEST(text_fallback, nothing_is_rebuilt_where_the_text_is_not_the_whole_answer_or_the_set_cannot_read_the_prompt) {
  answer_ledger reasoning = ledger_of({"thinking about it"}, "reasoning_content");
  EXPECT_FALSE(rebuild_ids_from_text(reasoning, chat_body, {&qwen3(), &qwen3_chat(), false}, 1000));
  EXPECT_TRUE(reasoning.prompt_ids().empty());
  answer_ledger plain = ledger_of({" text"});
  EXPECT_FALSE(rebuild_ids_from_text(plain, chat_body, {}, 1000)) << "no tokenizer";
  EXPECT_FALSE(rebuild_ids_from_text(plain, chat_body, {&qwen3(), nullptr, false}, 1000)) << "a chat and no template";
  EXPECT_TRUE(rebuild_ids_from_text(plain, chat_body, {&qwen3(), nullptr, true}, 1000)) << "the plain fallback renders it";
  answer_ledger too_long = ledger_of({" text"});
  EXPECT_FALSE(rebuild_ids_from_text(too_long, chat_body, {&qwen3(), &qwen3_chat(), false}, 10));
  EXPECT_TRUE(too_long.prompt_ids().empty());
}

}  // namespace
}  // namespace kvr
