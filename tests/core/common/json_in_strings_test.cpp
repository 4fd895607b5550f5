/// Every entry point that parses JSON kvrouter did not write, fed JSON nesting 100,000 levels
/// deep, as a body and inside a string field parsed later (tool-call arguments): each answers
/// an error naming what it refused, and none walks the tree (on main the chat template's walk of
/// parsed tool-call arguments overflowed the stack: issue 40).

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/common/json_parse.hpp"
#include "core/config/router_file.hpp"
#include "core/disagg/pd_requests.hpp"
#include "core/prompt/api_translation.hpp"
#include "core/prompt/chat_template.hpp"
#include "core/prompt/jinja/error.hpp"
#include "core/prompt/tokenize_api.hpp"
#include "core/prompt/tokenizer.hpp"

namespace kvr {
namespace {

constexpr std::size_t hostile_depth = 100'000;

std::string nested_arrays(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

/// A chat whose second message carries one tool call with `arguments` as given.
std::string messages_with_arguments(const std::string& arguments) {
  return nlohmann::json::array({{{"role", "user"}, {"content", "hi"}},
                                {{"role", "assistant"},
                                 {"content", ""},
                                 {"tool_calls", {{{"id", "c"}, {"type", "function"},
                                                  {"function", {{"name", "f"}, {"arguments", arguments}}}}}}},
                                {{"role", "user"}, {"content", "go"}}})
      .dump();
}

const chat_template& tool_template() {
  static const chat_template chat = *chat_template::from_source(
      "{% for m in messages %}{{ m.role }}:{{ m.content }}{% if m.tool_calls %}{{ m.tool_calls[0].function.arguments | tojson }}"
      "{% endif %}\n{% endfor %}");
  return chat;
}

TEST(json_in_strings, the_bounded_parser_refuses_deep_text_unparsed_and_reads_text_at_the_bound) {
  EXPECT_EQ(parse_json<nlohmann::json>(nested_arrays(hostile_depth)).error(), json_parse_error::too_deep);
  EXPECT_EQ(parse_json<nlohmann::ordered_json>("{\"a\":" + nested_arrays(hostile_depth) + "}").error(), json_parse_error::too_deep);
  EXPECT_TRUE(parse_ordered_json(nested_arrays(hostile_depth)).is_discarded());
  ASSERT_TRUE(parse_json<nlohmann::json>(nested_arrays(max_json_depth)));
  EXPECT_EQ(parse_json<nlohmann::json>("[1,]").error(), json_parse_error::not_json);
  EXPECT_EQ(describe(json_parse_error::too_deep), "nests deeper than 512 levels");
}

TEST(json_in_strings, tool_call_arguments_nesting_too_deep_are_refused_naming_their_field) {
  const std::string messages = messages_with_arguments(nested_arrays(hostile_depth));
  auto rendered = tool_template().render({.messages_json = messages});
  ASSERT_FALSE(rendered);
  EXPECT_EQ(rendered.error().refused_field, "messages[1].tool_calls[0].function.arguments");
  EXPECT_EQ(rendered.error().message, "messages[1].tool_calls[0].function.arguments nests deeper than 512 levels");
  auto plain = chat_template::render_plain({.messages_json = messages});
  ASSERT_FALSE(plain);
  EXPECT_EQ(plain.error().refused_field, "messages[1].tool_calls[0].function.arguments");
}

TEST(json_in_strings, tool_call_arguments_within_the_bound_are_rendered_as_objects_and_non_json_stays_a_string) {
  auto rendered = tool_template().render({.messages_json = messages_with_arguments(R"({"q": [1, 2]})")});
  ASSERT_TRUE(rendered) << rendered.error().message;
  EXPECT_NE(rendered->find(R"({"q": [1, 2]})"), std::string::npos) << *rendered;
  auto deep_but_allowed = tool_template().render({.messages_json = messages_with_arguments(nested_arrays(500))});
  EXPECT_TRUE(deep_but_allowed) << deep_but_allowed.error().message;
  auto not_json = tool_template().render({.messages_json = messages_with_arguments("{not json")});
  ASSERT_TRUE(not_json);
  EXPECT_NE(not_json->find(R"("{not json")"), std::string::npos) << *not_json;
}

TEST(json_in_strings, a_template_value_deeper_than_the_walk_bound_is_a_render_error_not_a_stack_overflow) {
  // Values from JSON are bounded at 512 levels; one built deeper is refused by every walk.
  jinja::value deep = jinja::list{};
  for (int level = 0; level < 2 * jinja::max_value_depth; ++level) deep = jinja::list{deep};
  EXPECT_THROW((void)jinja::to_json_text(deep), jinja::render_error);
  EXPECT_THROW((void)deep.repr(), jinja::render_error);
  EXPECT_THROW((void)deep.equals(deep), jinja::render_error);
  EXPECT_NO_THROW((void)jinja::value::from_json(*parse_json<nlohmann::ordered_json>(nested_arrays(max_json_depth))));
}

TEST(json_in_strings, tokenize_refuses_a_chat_whose_tool_call_arguments_nest_too_deep) {
  static tokenizer qwen3 = *tokenizer::load(std::string(KVR_TOKENIZER_DIR) + "/qwen3/tokenizer.json");
  const std::string body = R"({"messages": )" + messages_with_arguments(nested_arrays(hostile_depth)) + "}";
  auto answer = answer_tokenize(body, qwen3, &tool_template(), false);
  ASSERT_FALSE(answer);
  EXPECT_EQ(answer.error().param, "messages[1].tool_calls[0].function.arguments");
  EXPECT_EQ(answer.error().code, api_errc::invalid_request);
  auto deep_body = answer_tokenize(R"({"prompt": "x", "extra": )" + nested_arrays(hostile_depth) + "}", qwen3, nullptr, false);
  ASSERT_FALSE(deep_body);
  EXPECT_EQ(deep_body.error().message, "the body is refused: it nests deeper than 512 levels");
}

TEST(json_in_strings, config_files_and_cards_nesting_too_deep_are_refused) {
  auto file = parse_router_file(R"({"router": {}, "worker_sets": )" + nested_arrays(hostile_depth) + "}");
  ASSERT_FALSE(file);
  EXPECT_EQ(file.error().message, "the config is refused: it nests deeper than 512 levels");
}

TEST(json_in_strings, a_prefill_answer_nesting_too_deep_is_not_json_to_the_disaggregated_leg) {
  EXPECT_EQ(kv_transfer_params_of(R"({"kv_transfer_params": {"a": )" + nested_arrays(hostile_depth) + "}}").error(),
            transfer_params_error::not_json);
}

TEST(json_in_strings, responses_and_messages_bodies_nesting_too_deep_are_not_translated) {
  const std::string deep = R"({"model": "m", "input": "hi", "metadata": )" + nested_arrays(hostile_depth) + "}";
  EXPECT_FALSE(responses_as_chat(deep));
  EXPECT_FALSE(messages_as_chat(R"({"model": "m", "messages": [], "metadata": )" + nested_arrays(hostile_depth) + "}"));
}

}  // namespace
}  // namespace kvr
