/// The prompt ids an engine computes for a body, as /tokenize answers them and as a migration's
/// text fallback rebuilds a prompt (docs/migration.md): read from the body's own bytes, by
/// vLLM's rules for special tokens, and bounded by the router's prompt limit.

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/prompt/chat_template.hpp"
#include "core/prompt/tokenize_api.hpp"
#include "core/prompt/tokenizer.hpp"

namespace kvr {
namespace {

tokenizer& qwen3() {
  static tokenizer loaded = *tokenizer::load(std::string(KVR_TOKENIZER_DIR) + "/qwen3/tokenizer.json");
  return loaded;
}

const chat_template& qwen3_chat() {
  static const chat_template chat = *chat_template::load(std::string(KVR_TOKENIZER_DIR) + "/qwen3/tokenizer_config.json");
  return chat;
}

std::vector<std::uint32_t> encoded(std::string_view text) {
  std::vector<std::uint32_t> ids;
  qwen3().encode(text, ids);
  return ids;
}

TEST(tokenize_api, a_chat_body_gives_the_ids_of_its_rendered_messages) {
  const std::string messages = R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is a KV cache?"}])";
  const std::string body = R"({"model": "m", "stream": true, "max_tokens": 300, "messages": )" + messages + "}";
  const auto ids = prompt_token_ids(body, qwen3(), &qwen3_chat(), false);
  ASSERT_TRUE(ids) << ids.error().message;
  const auto rendered = qwen3_chat().render({.messages_json = messages});
  ASSERT_TRUE(rendered);
  EXPECT_EQ(*ids, encoded(*rendered));
  const auto without_generation_prompt =
      prompt_token_ids(R"({"add_generation_prompt": false, "messages": )" + messages + "}", qwen3(), &qwen3_chat(), false);
  ASSERT_TRUE(without_generation_prompt);
  EXPECT_LT(without_generation_prompt->size(), ids->size());
}

TEST(tokenize_api, a_completion_prompt_may_be_text_token_ids_or_one_string_in_an_array) {
  const prompt_reading completion{.completion_prompts = true};
  const auto text = prompt_token_ids(R"({"prompt": "Hello, world!"})", qwen3(), nullptr, false, completion);
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, (std::vector<std::uint32_t>{9707, 11, 1879, 0}));  // HF tokenizers' ids; Qwen adds no special tokens
  const auto ids = prompt_token_ids(R"({"prompt": [5, 6, 7]})", qwen3(), nullptr, false, completion);
  ASSERT_TRUE(ids);
  EXPECT_EQ(*ids, (std::vector<std::uint32_t>{5, 6, 7}));
  const auto one_string = prompt_token_ids(R"({"prompt": ["Hello, world!"]})", qwen3(), nullptr, false, completion);
  ASSERT_TRUE(one_string);
  EXPECT_EQ(*one_string, *text);
  const auto two_strings = prompt_token_ids(R"({"prompt": ["a", "b"]})", qwen3(), nullptr, false, completion);
  ASSERT_FALSE(two_strings);
  EXPECT_EQ(two_strings.error().param, "prompt");
  // /tokenize takes a string, as vLLM's does.
  EXPECT_FALSE(prompt_token_ids(R"({"prompt": [5, 6, 7]})", qwen3(), nullptr, false));
}

/// Qwen3's tokenizer with a post-processor that opens every prompt with <|endoftext|>, as
/// Llama's opens it with its BOS token.
tokenizer& with_bos() {
  static tokenizer loaded = [] {
    std::ifstream in(std::string(KVR_TOKENIZER_DIR) + "/qwen3/tokenizer.json");
    std::stringstream text;
    text << in.rdbuf();
    auto doc = nlohmann::json::parse(text.str());
    const auto bos = std::to_string(*qwen3().added_token_id("<|endoftext|>"));
    doc["post_processor"] = nlohmann::json::parse(R"({"type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [)" + bos + "]}}}");
    return *tokenizer::from_json(doc.dump());
  }();
  return loaded;
}

TEST(tokenize_api, special_tokens_open_a_text_prompt_by_default_but_never_token_ids_or_a_chat) {
  const std::uint32_t bos = *qwen3().added_token_id("<|endoftext|>");
  const prompt_reading completion{.completion_prompts = true};
  const auto text = prompt_token_ids(R"({"prompt": "Hello, world!"})", with_bos(), nullptr, false, completion);
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, (std::vector<std::uint32_t>{bos, 9707, 11, 1879, 0}));
  const auto without = prompt_token_ids(R"({"prompt": "Hello, world!", "add_special_tokens": false})", with_bos(), nullptr, false);
  ASSERT_TRUE(without);
  EXPECT_EQ(without->size(), 4u);
  const auto ids = prompt_token_ids(R"({"prompt": [5, 6]})", with_bos(), nullptr, false, completion);
  ASSERT_TRUE(ids);
  EXPECT_EQ(*ids, (std::vector<std::uint32_t>{5, 6})) << "a token-id prompt goes to the engine as it is";
  const auto chat = prompt_token_ids(R"({"messages": [{"role": "user", "content": "hi"}]})", with_bos(), &qwen3_chat(), false);
  ASSERT_TRUE(chat);
  EXPECT_NE(chat->front(), bos) << "a chat's template writes its own";
}

TEST(tokenize_api, a_prompt_past_the_limit_is_refused_naming_the_limit) {
  const std::string words = nlohmann::json(std::string(4000, 'x') + " and more words after it").dump();
  const auto refused = prompt_token_ids(R"({"prompt": )" + words + "}", qwen3(), nullptr, false, {.max_tokens = 100});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message, "the prompt is longer than the 100 tokens this router accepts");
  EXPECT_EQ(refused.error().param, "prompt");
  const std::string chat = R"({"messages": [{"role": "user", "content": )" + words + "}]}";
  const auto refused_chat = answer_tokenize(chat, qwen3(), &qwen3_chat(), false, 100);
  ASSERT_FALSE(refused_chat);
  EXPECT_EQ(refused_chat.error().param, "messages");
  EXPECT_TRUE(answer_tokenize(chat, qwen3(), &qwen3_chat(), false, 100000));
}

TEST(tokenize_api, the_tokenize_answer_is_vllms_shape) {
  const auto answer = answer_tokenize(R"({"prompt": "Hello, world!"})", qwen3(), nullptr, false);
  ASSERT_TRUE(answer);
  EXPECT_EQ(*answer, R"({"count":4,"tokens":[9707,11,1879,0],"token_strs":null})");
  EXPECT_EQ(nlohmann::json::parse(*answer)["count"], 4);
}

TEST(tokenize_api, bodies_that_are_not_what_they_should_be_are_refused_naming_the_field) {
  const auto not_object = answer_tokenize("[1, 2]", qwen3(), nullptr, false);
  ASSERT_FALSE(not_object);
  EXPECT_EQ(not_object.error().code, api_errc::invalid_json);
  const auto neither = answer_tokenize(R"({"model": "m"})", qwen3(), nullptr, false);
  ASSERT_FALSE(neither);
  EXPECT_EQ(neither.error().message, "give prompt or messages");
  const auto flag = answer_tokenize(R"({"prompt": "a", "add_special_tokens": 1})", qwen3(), nullptr, false);
  ASSERT_FALSE(flag);
  EXPECT_EQ(flag.error().param, "add_special_tokens");
  const auto messages = answer_tokenize(R"({"messages": "hi"})", qwen3(), &qwen3_chat(), false);
  ASSERT_FALSE(messages);
  EXPECT_EQ(messages.error().param, "messages");
  const auto no_template = answer_tokenize(R"({"messages": []})", qwen3(), nullptr, false);
  ASSERT_FALSE(no_template);
  EXPECT_EQ(no_template.error().message, "this model has no chat template to render messages with");
  const auto escaped_key = answer_tokenize(R"({"pr\u006fmpt": "Hello, world!"})", qwen3(), nullptr, false);
  ASSERT_TRUE(escaped_key);
  EXPECT_NE(escaped_key->find("[9707,11,1879,0]"), std::string::npos);
}

TEST(tokenize_api, detokenize_reads_plain_and_unusual_id_arrays_and_names_an_unknown_id) {
  const auto plain = answer_detokenize(R"({"tokens": [9707, 11, 1879, 0]})", qwen3());
  ASSERT_TRUE(plain);
  EXPECT_EQ(nlohmann::json::parse(*plain)["prompt"], "Hello, world!");
  const auto spaced = answer_detokenize(R"({"tokens": [ 9707 ,11,1879,0 ]})", qwen3());
  ASSERT_TRUE(spaced);
  EXPECT_EQ(*spaced, *plain);
  const auto empty = answer_detokenize(R"({"tokens": []})", qwen3());
  ASSERT_TRUE(empty);
  EXPECT_EQ(nlohmann::json::parse(*empty)["prompt"], "");
  const auto unknown = answer_detokenize(R"({"tokens": [9707, 4000000]})", qwen3());
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("token id 4000000 is not in the vocabulary"), std::string::npos);
  EXPECT_FALSE(answer_detokenize(R"({"tokens": [-1]})", qwen3()));
  EXPECT_FALSE(answer_detokenize(R"({"tokens": "9707"})", qwen3()));
}

}  // namespace
}  // namespace kvr
