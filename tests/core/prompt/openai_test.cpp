#include "core/prompt/openai.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kvr {
namespace {

std::expected<routing_request, api_error> parse(api_endpoint endpoint, std::string body) {
  static request_parser parser;
  const std::size_t size = body.size();
  body.reserve(size + request_parser::padding);
  return parser.parse(endpoint, std::string_view(body.data(), size), body.capacity());
}

TEST(openai, reads_model_stream_and_chat_messages_with_text_and_image_parts) {
  auto request = parse(api_endpoint::chat_completions, R"({
    "model": "qwen3", "stream": true, "temperature": 0.2,
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "What is "},
                                   {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                                   {"type": "text", "text": "this?"}]}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]})");
  ASSERT_TRUE(request) << request.error().message;
  EXPECT_EQ(request->model, "qwen3");
  EXPECT_TRUE(request->stream);
  ASSERT_EQ(request->messages.size(), 2u);
  EXPECT_EQ(request->messages[0].role, "system");
  EXPECT_EQ(request->messages[0].text, "Be brief.");
  EXPECT_EQ(request->messages[1].text, "What is this?");
  EXPECT_EQ(request->messages[1].image_urls, std::vector<std::string>{"data:image/png;base64,AAAA"});
  EXPECT_GT(request->prompt_tokens, 0u);
}

TEST(openai, reads_every_prompt_form_of_completions) {
  auto text = parse(api_endpoint::completions, R"({"model": "m", "prompt": "hello world"})");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->prompt_text, "hello world");
  EXPECT_FALSE(text->stream);

  auto strings = parse(api_endpoint::completions, R"({"model": "m", "prompt": ["first", "second"]})");
  ASSERT_TRUE(strings);
  EXPECT_EQ(strings->prompt_text, "first");

  auto ids = parse(api_endpoint::completions, R"({"model": "m", "prompt": [1, 2, 3, 4294967295]})");
  ASSERT_TRUE(ids);
  EXPECT_EQ(ids->prompt_token_ids, (std::vector<std::uint32_t>{1, 2, 3, 4294967295u}));
  EXPECT_EQ(ids->prompt_tokens, 4u);

  auto batches = parse(api_endpoint::completions, R"({"model": "m", "prompt": [[5, 6], [7]]})");
  ASSERT_TRUE(batches);
  EXPECT_EQ(batches->prompt_token_ids, (std::vector<std::uint32_t>{5, 6}));
}

TEST(openai, malformed_json_is_invalid_json) {
  for (const char* body : {"{\"model\": \"m\", ", "not json", "{\"model\": \"m\", \"prompt\": \"x\"} trailing", "[1, 2]"}) {
    auto request = parse(api_endpoint::completions, body);
    ASSERT_FALSE(request) << body;
    EXPECT_EQ(request.error().code, api_errc::invalid_json) << body;
  }
}

TEST(openai, missing_or_mistyped_fields_name_the_parameter) {
  struct row {
    api_endpoint endpoint;
    const char* body;
    const char* param;
  };
  const row rows[] = {
      {api_endpoint::completions, R"({"prompt": "x"})", "model"},
      {api_endpoint::completions, R"({"model": 3, "prompt": "x"})", "model"},
      {api_endpoint::completions, R"({"model": "m"})", "prompt"},
      {api_endpoint::completions, R"({"model": "m", "prompt": [-1]})", "prompt"},
      {api_endpoint::completions, R"({"model": "m", "prompt": {"a": 1}})", "prompt"},
      {api_endpoint::completions, R"({"model": "m", "prompt": "x", "stream": "yes"})", "stream"},
      {api_endpoint::chat_completions, R"({"model": "m"})", "messages"},
      {api_endpoint::chat_completions, R"({"model": "m", "messages": []})", "messages"},
      {api_endpoint::chat_completions, R"({"model": "m", "messages": [{"content": "hi"}]})", "messages"},
      {api_endpoint::chat_completions, R"({"model": "m", "messages": [{"role": "user", "content": 5}]})", "messages"},
  };
  for (const row& r : rows) {
    auto request = parse(r.endpoint, r.body);
    ASSERT_FALSE(request) << r.body;
    EXPECT_EQ(request.error().code, api_errc::invalid_request) << r.body;
    EXPECT_EQ(request.error().param, r.param) << r.body;
  }
}

TEST(openai, errors_have_openais_shape_and_status) {
  const auto body = nlohmann::json::parse(error_body({api_errc::unknown_model, "The model `x` does not exist.", "model"}));
  EXPECT_EQ(body["error"]["message"], "The model `x` does not exist.");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "model");
  EXPECT_EQ(body["error"]["code"], "model_not_found");
  EXPECT_TRUE(nlohmann::json::parse(error_body({api_errc::overloaded, "busy", {}}))["error"]["param"].is_null());

  EXPECT_EQ(http_status(api_errc::invalid_json), 400);
  EXPECT_EQ(http_status(api_errc::unknown_model), 404);
  EXPECT_EQ(http_status(api_errc::body_too_large), 413);
  EXPECT_EQ(http_status(api_errc::too_many_requests), 429);
  EXPECT_EQ(http_status(api_errc::overloaded), 503);
  EXPECT_EQ(http_status(api_errc::worker_failed), 502);
  EXPECT_EQ(http_status(api_errc::worker_timeout), 504);
}

}  // namespace
}  // namespace kvr
