#include "core/prompt/openai.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kvr {
namespace {

using parse_method = std::expected<routing_request, api_error> (request_parser::*)(api_endpoint, std::string_view, std::size_t);

/// `body` through `method` (the full parse unless told), with the padding it asks for.
std::expected<routing_request, api_error> parse(api_endpoint endpoint, std::string body,
                                                parse_method method = &request_parser::parse) {
  static request_parser parser;
  const std::size_t size = body.size();
  body.reserve(size + request_parser::padding);
  return (parser.*method)(endpoint, std::string_view(body.data(), size), body.capacity());
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
  EXPECT_EQ(request->messages.count, 2u);
  EXPECT_EQ(request->messages.user_or_assistant, 1u);
  EXPECT_EQ(request->messages.text_bytes, std::string("Be brief.What is this?").size());
  EXPECT_EQ(request->messages.image_urls, std::vector<std::string>{"data:image/png;base64,AAAA"});
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

TEST(openai, a_body_nesting_deeper_than_512_levels_is_refused_before_anything_walks_it) {
  std::string tools;
  for (int i = 0; i < 20000; ++i) tools += "[";
  for (int i = 0; i < 20000; ++i) tools += "]";
  for (const std::string& field : {std::string("\"tools\": ") + tools,
                                   std::string("\"chat_template_kwargs\": {\"x\": ") + tools + "}",
                                   std::string("\"extra\": ") + tools}) {
    auto request = parse(api_endpoint::chat_completions,
                         R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], )" + field + "}");
    ASSERT_FALSE(request);
    EXPECT_EQ(request.error().code, api_errc::invalid_request);
    EXPECT_EQ(request.error().message, "the body is refused: it nests deeper than 512 levels");
  }
  std::string messages = R"({"model": "m", "messages": [{"role": "user", "content": [)";
  for (int i = 0; i < 600; ++i) messages += R"({"type": "text", "text": )";
  messages += "\"x\"";
  for (int i = 0; i < 600; ++i) messages += "}";
  messages += "]}]}";
  EXPECT_EQ(parse(api_endpoint::chat_completions, messages).error().code, api_errc::invalid_request);
}

TEST(openai, content_after_the_object_is_invalid_json) {
  for (const char* body : {R"({"model": "m", "prompt": "a"} {"model": "n", "prompt": "b"})",
                           R"({"model": "m", "prompt": "a"}})", R"({"model": "m", "prompt": "a"} x)"}) {
    auto request = parse(api_endpoint::completions, body);
    ASSERT_FALSE(request) << body;
    EXPECT_EQ(request.error().code, api_errc::invalid_json) << body;
    EXPECT_EQ(request.error().message, "the body is not valid JSON: trailing content after the value") << body;
  }
}

TEST(openai, a_lone_surrogate_is_named_as_such_after_its_field_not_as_a_wrong_type) {
  auto model = parse(api_endpoint::completions, R"({"model": "\ud800", "prompt": "a"})");
  ASSERT_FALSE(model);
  EXPECT_EQ(model.error().param, "model");
  EXPECT_TRUE(model.error().message.starts_with("model: a string has a bad escape or a lone UTF-16 surrogate"))
      << model.error().message;
  auto text = parse(api_endpoint::chat_completions, R"({"model": "m", "messages": [{"role": "user", "content": "a\udc00b"}]})");
  ASSERT_FALSE(text);
  EXPECT_TRUE(text.error().message.starts_with("messages: a string has a bad escape or a lone UTF-16 surrogate"))
      << text.error().message;
  EXPECT_EQ(parse(api_endpoint::completions, R"({"model": 7, "prompt": "a"})").error().message, "model must be a string");
  EXPECT_TRUE(parse(api_endpoint::completions, R"({"model": "\ud83d\ude00", "prompt": "a"})")) << "a surrogate pair is fine";
}

}  // namespace
}  // namespace kvr

namespace kvr {
namespace {

std::expected<routing_request, api_error> parse_envelope(api_endpoint endpoint, std::string body) {
  return parse(endpoint, std::move(body), &request_parser::parse_envelope);
}

std::expected<routing_request, api_error> parse_walking(api_endpoint endpoint, std::string body) {
  return parse(endpoint, std::move(body), &request_parser::parse_walking);
}

TEST(openai_envelope, reads_model_stream_and_user_and_leaves_the_prompt_unread) {
  std::string ids;
  for (int i = 0; i < 4096; ++i) ids += (i ? "," : "") + std::to_string(100000 + i);
  const std::string body = R"({"prompt": [)" + ids + R"(], "model": "m", "stream": true, "user": "u1", "max_tokens": 4})";
  auto request = parse_envelope(api_endpoint::completions, body);
  ASSERT_TRUE(request) << request.error().message;
  EXPECT_EQ(request->model, "m");
  EXPECT_TRUE(request->stream);
  EXPECT_EQ(request->user, "u1");
  EXPECT_TRUE(request->prompt_token_ids.empty());
  EXPECT_TRUE(request->prompt_text.empty());
  EXPECT_EQ(request->prompt_tokens, body.size() / 4);

  auto chat = parse_envelope(api_endpoint::chat_completions,
                             R"({"messages": [{"content": 7, "no role": true}], "model": "m", "tools": "not checked"})");
  ASSERT_TRUE(chat) << chat.error().message;  // the worker judges the messages' insides
  EXPECT_EQ(chat->messages.count, 0u);
}

TEST(openai_envelope, refuses_what_every_worker_would_with_the_full_parse_errors) {
  struct refusal {
    api_endpoint endpoint;
    const char* body;
    api_errc code;
    const char* param;
  };
  for (const refusal& r : std::initializer_list<refusal>{
           {api_endpoint::chat_completions, R"({"model": "m", "messages": [)", api_errc::invalid_json, ""},
           {api_endpoint::chat_completions, R"([1, 2])", api_errc::invalid_json, ""},
           {api_endpoint::chat_completions, R"({"messages": []})", api_errc::invalid_request, "model"},
           {api_endpoint::chat_completions, R"({"model": 3, "messages": []})", api_errc::invalid_request, "model"},
           {api_endpoint::chat_completions, R"({"model": "m"})", api_errc::invalid_request, "messages"},
           {api_endpoint::chat_completions, R"({"model": "m", "messages": {}})", api_errc::invalid_request, "messages"},
           {api_endpoint::completions, R"({"model": "m"})", api_errc::invalid_request, "prompt"},
           {api_endpoint::completions, R"({"model": "m", "prompt": "x", "stream": "yes"})", api_errc::invalid_request, "stream"},
       }) {
    auto request = parse_envelope(r.endpoint, r.body);
    ASSERT_FALSE(request) << r.body;
    EXPECT_EQ(request.error().code, r.code) << r.body << ": " << request.error().message;
    EXPECT_EQ(request.error().param, r.param) << r.body;
  }
}

TEST(openai_envelope, reads_escaped_keys_and_the_last_of_repeated_ones_and_no_key_nested_in_another_member) {
  auto request = parse_envelope(api_endpoint::chat_completions,
                                R"({"meta": {"model": "inner", "stream": "x"}, "\u006dodel": "first", "model": "m\u00e9",)"
                                R"( "messag\u0065s": [1], "stream": false, "stream": true})");
  ASSERT_TRUE(request) << request.error().message;
  EXPECT_EQ(request->model, "m\xc3\xa9");
  EXPECT_TRUE(request->stream);
  auto not_an_array = parse_envelope(api_endpoint::chat_completions, R"({"model": "m", "messag\u0065s": "hi"})");
  ASSERT_FALSE(not_an_array);
  EXPECT_EQ(not_an_array.error().param, "messages");
}

TEST(openai_envelope, a_field_nested_a_million_deep_is_skipped_or_refused_without_recursion) {
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  auto request = parse_envelope(api_endpoint::other, R"({"model": "m", "x": )" + deep + "}");
  if (request) EXPECT_EQ(request->model, "m");
  else EXPECT_EQ(request.error().code, api_errc::invalid_json);
}

TEST(openai_token_ids, a_prompt_of_token_ids_reads_as_the_full_parse_reads_it) {
  std::string ids;
  for (int i = 0; i < 4096; ++i) ids += (i ? ", " : "") + std::to_string((i * 7919u) % 151000u);
  struct row {
    api_endpoint endpoint;
    std::string body;
  };
  for (const row& r : std::initializer_list<row>{
           {api_endpoint::completions, R"({"model": "m", "prompt": [)" + ids + R"(], "stream": true, "user": "u"})"},
           {api_endpoint::completions, "{\n \"prompt\" : [ 1 ,2\n,3 ] ,\"model\":\"m\\u00e9\", \"max_tokens\": [[{}]]}"},
           {api_endpoint::generate, R"({"input_ids": [)" + ids + R"(], "sampling_params": {"max_new_tokens": 4}})"},
       }) {
    auto shortcut = parse(r.endpoint, r.body);
    auto walked = parse_walking(r.endpoint, r.body);
    ASSERT_TRUE(shortcut) << shortcut.error().message;
    ASSERT_TRUE(walked) << walked.error().message;
    EXPECT_EQ(shortcut->model, walked->model);
    EXPECT_EQ(shortcut->stream, walked->stream);
    EXPECT_EQ(shortcut->user, walked->user);
    EXPECT_EQ(shortcut->prompt_token_ids, walked->prompt_token_ids);
    EXPECT_FALSE(shortcut->prompt_token_ids.empty());
    EXPECT_EQ(shortcut->prompt_tokens, walked->prompt_tokens);
  }
}

TEST(openai_token_ids, what_the_shortcut_declines_gets_the_full_parses_answer) {
  for (const char* body : {
           R"({"model": "m", "prompt": [01, 2]})", R"({"model": "m", "prompt": [1.5]})", R"({"model": "m", "prompt": [-1]})",
           R"({"model": "m", "prompt": [4294967296]})", R"({"model": "m", "prompt": []})", R"({"model": "m", "prompt": [1,]})",
           R"({"model": "m", "prompt": [[1, 2], [3]]})", R"({"model": "m", "prompt": [1], "prompt": [2]})",
           R"({"model": "m", "pr\u006fmpt": [1]})", R"({"model": 7, "prompt": [1]})", R"({"prompt": [1]})",
           R"({"model": "m", "prompt": [1], "stream": "yes"})", R"({"model": "m", "prompt": [1]} [])",
           R"({"model": "m", "prompt": [1]})",
       }) {
    auto shortcut = parse(api_endpoint::completions, body);
    auto walked = parse_walking(api_endpoint::completions, body);
    ASSERT_EQ(shortcut.has_value(), walked.has_value()) << body;
    if (shortcut) {
      EXPECT_EQ(shortcut->prompt_token_ids, walked->prompt_token_ids) << body;
      EXPECT_EQ(shortcut->model, walked->model) << body;
      continue;
    }
    EXPECT_EQ(shortcut.error().code, walked.error().code) << body;
    EXPECT_EQ(shortcut.error().param, walked.error().param) << body;
    EXPECT_EQ(shortcut.error().message, walked.error().message) << body;
  }
  auto both = parse(api_endpoint::generate, R"({"text": "hi", "input_ids": [1, 2]})");
  ASSERT_TRUE(both);  // /generate with a text beside the ids: the full parse reads both
  EXPECT_EQ(both->prompt_text, "hi");
  EXPECT_EQ(both->prompt_token_ids, (std::vector<std::uint32_t>{1, 2}));
}

}  // namespace
}  // namespace kvr
