#include "core/common/json_parse.hpp"

#include <gtest/gtest.h>

namespace kvr {
namespace {

using ordered_json = nlohmann::ordered_json;

/// Same value, same types (signed, unsigned, float), same key order as nlohmann's own parser.
void expect_as_nlohmann(std::string_view text) {
  const ordered_json ours = parse_ordered_json(text);
  const ordered_json theirs = ordered_json::parse(text, nullptr, false);
  ASSERT_EQ(ours.is_discarded(), theirs.is_discarded()) << text;
  if (theirs.is_discarded()) return;
  EXPECT_EQ(ours.dump(), theirs.dump()) << text;
  EXPECT_EQ(ours, theirs) << text;
}

TEST(json_parse, reads_every_kind_of_value_as_nlohmanns_parser_does) {
  for (const char* text : {
           R"([{"role": "user", "content": "hi \"there\" \\ \n \u00e9 \ud83d\ude00"}, {"role": "assistant", "content": null}])",
           R"({"b": 1, "a": -2, "c": 3.5, "d": 1e300, "e": -0, "f": 18446744073709551615, "g": -9223372036854775808})",
           R"({"z": [true, false, null, [], {}], "y": {"x": {"w": [1, [2, [3]]]}}})", R"("just a string")", "42", "-7",
           "0.1", "[1.0, 2.50, 1E2, -1e-2]", R"({"k": 1, "k": 2, "j": 3})", R"({"k": {"a": 1}, "j": 0, "k": [2]})",
       }) {
    expect_as_nlohmann(text);
  }
}

TEST(json_parse, a_repeated_key_keeps_its_first_place_and_its_last_value) {
  const ordered_json value = parse_ordered_json(R"({"k": 1, "j": 2, "k": 3})");
  EXPECT_EQ(value.dump(), R"({"k":3,"j":2})");
}

TEST(json_parse, what_is_not_json_is_discarded_and_an_integer_past_64_bits_is_nlohmanns_double) {
  for (const char* text : {"", "{", "[1,]", "{\"a\" 1}", "nul", "\"\xff\"", "[1] x", "01", "\"\\ud800\""})
    EXPECT_TRUE(parse_ordered_json(text).is_discarded()) << text;
  expect_as_nlohmann("[123456789012345678901234567890]");
  expect_as_nlohmann("-123456789012345678901234567890");
}

/// nlohmann's parser takes a NUL byte for the end of its input; no JSON text holds one (RFC
/// 8259 escapes every control character), so what follows it never goes unread.
TEST(json_parse, a_nul_byte_ends_nothing_text_that_holds_one_is_not_json) {
  using namespace std::string_view_literals;
  for (const std::string_view text : {"{\"a\": 1}\0garbage"sv, "[1]\0"sv, "[123456789012345678901234567890]\0]"sv,
                                      "{\"a\": \"x\0y\"}"sv})
    EXPECT_TRUE(parse_ordered_json(text).is_discarded()) << text.size();
}

}  // namespace
}  // namespace kvr
