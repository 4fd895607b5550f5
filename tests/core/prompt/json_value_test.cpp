#include "core/prompt/jinja/json_value.hpp"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kvr::jinja {
namespace {

/// What `text` reads as, printed as the templates' `tojson` prints it ("!" + the error if not).
std::string read(std::string_view text) {
  auto parsed = value_from_json_text(text);
  if (!parsed) return "!" + describe(parsed.error());
  return to_json_text(*parsed);
}

TEST(json_value, reads_each_kind_of_value_as_python_json_loads_does) {
  EXPECT_EQ(read(R"( {"a": [1, -2, 0.5, 1e2, true, false, null, "x"]} )"),
            R"({"a": [1, -2, 0.5, 100.0, true, false, null, "x"]})");
  EXPECT_EQ(read("-0"), "0");
  EXPECT_EQ(read("[]"), "[]");
  EXPECT_EQ(read("{}"), "{}");
  EXPECT_EQ(read("9223372036854775807"), "9223372036854775807");
  EXPECT_EQ(read("9223372036854775808"), "9.223372036854776e+18");  // past 64 signed bits: a float
  EXPECT_EQ(read("1e-400"), "0.0");
  EXPECT_EQ(read("-1e-400"), "-0.0");
  EXPECT_EQ(read("4.9e-324"), "5e-324");
}

TEST(json_value, unescapes_strings_and_joins_surrogate_pairs) {
  EXPECT_EQ(read(R"("a\"b\\c\/d\b\f\n\r\t")"), R"("a\"b\\c/d\b\f\n\r\t")");
  const auto emoji = value_from_json_text(R"("\ud83d\ude00 \u00e9 \u0000")");
  ASSERT_TRUE(emoji);
  EXPECT_EQ(emoji->as_string(), std::string("\xF0\x9F\x98\x80 \xC3\xA9 ") + std::string(1, '\0'));
  EXPECT_EQ(read("\"caf\xC3\xA9\""), "\"caf\xC3\xA9\"");
}

TEST(json_value, a_repeated_key_keeps_its_first_place_and_its_last_value_in_small_and_large_objects) {
  EXPECT_EQ(read(R"({"a": 1, "b": 2, "a": 3})"), R"({"a": 3, "b": 2})");
  std::string large = "{";
  for (int i = 0; i < 100; ++i) large += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ", ";
  large += R"("k3": "again", "k70": "again", "last": 0})";
  const auto parsed = value_from_json_text(large);
  ASSERT_TRUE(parsed);
  const dict& members = parsed->as_dict();
  ASSERT_EQ(members.items.size(), 101u);
  EXPECT_EQ(members.items[3].first, "k3");
  EXPECT_EQ(members.items[3].second.as_string(), "again");
  EXPECT_EQ(members.items[70].second.as_string(), "again");
  EXPECT_EQ(members.items[100].first, "last");
}

TEST(json_value, reads_what_nlohmann_reads_on_a_varied_document) {
  const std::string text =
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "h\u00e9llo"}, {"type": "image_url"}]},)"
      R"( {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{\"q\": 1}"}}]}],)"
      R"( "n": [0, -1, 3.25, 1.5e-7, 12345678901234], "b": [true, false, null], "nested": {"x": {"y": []}}})";
  const auto theirs = nlohmann::ordered_json::parse(text);
  EXPECT_EQ(read(text), to_json_text(value::from_json(theirs)));
}

TEST(json_value, refuses_what_is_not_one_json_value) {
  for (const char* text : {"", " ", "[1,]", "{\"a\" 1}", "{\"a\": 1,}", "[1 2]", "01", "1.", ".5", "1e", "-", "+1",
                           "tru", "nul", "\"open", "\"bad \\x escape\"", "\"raw \x01 control\"", "\"\\ud800\"",
                           "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\\u12\"", "1e999", "[1] [2]", "{} x", "{1: 2}",
                           "\"\xC3\x28\"", "[\"\xFF\"]"})
    EXPECT_EQ(read(text), "!is not valid JSON") << text;
}

TEST(json_value, refuses_nesting_past_the_bound_before_reading_it) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(read(deep), "!nests deeper than 512 levels");
  const std::string allowed = std::string(512, '[') + std::string(512, ']');
  EXPECT_TRUE(value_from_json_text(allowed));
  EXPECT_FALSE(value_from_json_text(allowed, 100));
}

TEST(json_value, a_budget_stops_the_read_once_what_it_built_would_pass_it) {
  // 40 bytes of value for every 2 bytes of text: the budget is spent long before the end.
  std::string numbers = "[1";
  for (int i = 0; i < 1'000'000; ++i) numbers += ",1";
  numbers += "]";
  value_budget small{.bytes_left = 1u << 20};
  EXPECT_EQ(value_from_json_text(numbers, max_json_depth, &small).error(), json_parse_error::too_large);
  EXPECT_EQ(small.bytes_left, 0u);
  value_budget enough{.bytes_left = 64u << 20};
  ASSERT_TRUE(value_from_json_text(numbers, max_json_depth, &enough));
  EXPECT_LT(enough.bytes_left, (64u << 20) - 1'000'001 * sizeof(value));
  // One budget is shared by every read of a request: the second read finds what is left.
  value_budget shared = value_budget::for_text_of(0);
  const std::string prose(6u << 20, 'x');
  EXPECT_TRUE(value_from_json_text("\"" + prose + "\"", max_json_depth, &shared));
  EXPECT_EQ(value_from_json_text("\"" + prose + "\"", max_json_depth, &shared).error(), json_parse_error::too_large);
}

TEST(json_value, an_object_of_a_hundred_thousand_keys_is_read_with_every_key_once) {
  // The quadratic case of key-by-key scans (issue 40): here each key is hashed once.
  std::string text = "{";
  for (int i = 0; i < 100000; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
  text += ",\"k5\":2,\"k99999\":3}";
  const auto parsed = value_from_json_text(text);
  ASSERT_TRUE(parsed);
  const dict& members = parsed->as_dict();
  ASSERT_EQ(members.items.size(), 100000u);
  EXPECT_EQ(members.items[5].second.as_int(), 2);
  EXPECT_EQ(members.items[99999].second.as_int(), 3);
}

}  // namespace
}  // namespace kvr::jinja
