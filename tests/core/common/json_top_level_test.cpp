// The top-level member scan that the envelope parse of round-robin sets relies on: members
// found over values it does not read, the object's own syntax enforced, brackets matched.
#include "core/common/json_top_level.hpp"

#include <string>

#include <gtest/gtest.h>

namespace kvr {
namespace {

std::vector<json_member> members_of(std::string_view body) {
  std::vector<json_member> out;
  auto scanned = scan_top_level_members(body, out);
  EXPECT_TRUE(scanned.has_value()) << (scanned ? "" : scanned.error());
  return out;
}

std::string error_of(std::string_view body, std::size_t max_depth = max_json_depth) {
  std::vector<json_member> out;
  auto scanned = scan_top_level_members(body, out, max_depth);
  return scanned ? "" : scanned.error();
}

TEST(json_top_level, finds_each_member_with_its_raw_key_and_value_bytes) {
  const auto members = members_of(R"( { "model" : "m", "n":2,"stream":true , "x\"y": {"a": [1, {"b": "]}"}]}, "z":null } )");
  ASSERT_EQ(members.size(), 5u);
  EXPECT_EQ(members[0].raw_key, R"("model")");
  EXPECT_EQ(members[0].value, R"("m")");
  EXPECT_EQ(members[1].value, "2");
  EXPECT_EQ(members[2].value, "true");
  EXPECT_EQ(members[3].raw_key, R"("x\"y")");
  EXPECT_EQ(members[3].value, R"({"a": [1, {"b": "]}"}]})");
  EXPECT_EQ(members[4].value, "null");
}

TEST(json_top_level, steps_over_long_values_whatever_sixteen_byte_stretch_a_bracket_or_quote_falls_in) {
  for (std::size_t pad = 0; pad < 40; ++pad) {
    std::string prompt = "[";
    for (int i = 0; i < 300; ++i) prompt += std::to_string(100000 + i) + ",";
    prompt += std::string(pad, ' ') + R"("te\"xt ] with } brackets", [[]], {"k": [ ]})" + std::string(pad % 7, ' ') + "]";
    const std::string body = R"({"prompt":)" + prompt + R"(,"model":"after"})";
    const auto members = members_of(body);
    ASSERT_EQ(members.size(), 2u) << pad;
    EXPECT_EQ(members[0].value, prompt) << pad;
    EXPECT_EQ(members[1].value, R"("after")") << pad;
  }
}

TEST(json_top_level, an_empty_object_has_no_members_and_repeated_keys_are_kept) {
  EXPECT_TRUE(members_of(" {} ").empty());
  EXPECT_EQ(members_of(R"({"a":1,"a":2})").size(), 2u);
}

TEST(json_top_level, refuses_what_is_not_one_object) {
  EXPECT_NE(error_of("[1,2]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(error_of("").find("not a JSON object"), std::string::npos);
  EXPECT_NE(error_of(R"({"a":1} {"b":2})").find("followed by more content"), std::string::npos);
  EXPECT_NE(error_of(R"({"a":1)").find("not separated"), std::string::npos);
}

TEST(json_top_level, refuses_a_malformed_member) {
  EXPECT_NE(error_of(R"({a:1})").find("key is not a string"), std::string::npos);
  EXPECT_NE(error_of(R"({"a" 1})").find("lacks its ':'"), std::string::npos);
  EXPECT_NE(error_of(R"({"a":})").find("value is missing"), std::string::npos);
  EXPECT_NE(error_of(R"({"a":1,})").find("key is not a string"), std::string::npos);
  EXPECT_NE(error_of(R"({"a":1 "b":2})").find("not separated"), std::string::npos);
  EXPECT_NE(error_of(R"({"a":tr"ue"})").find("not separated"), std::string::npos);
}

TEST(json_top_level, refuses_unterminated_strings_and_containers) {
  EXPECT_NE(error_of(R"({"a":"abc})").find("string is not terminated"), std::string::npos);
  EXPECT_NE(error_of(R"({"a":"abc\"})").find("string is not terminated"), std::string::npos);
  EXPECT_NE(error_of(R"({"a":[1,2)").find("not terminated"), std::string::npos);
  EXPECT_NE(error_of(R"({"a":[[1,2})").find("not terminated"), std::string::npos);
}

TEST(json_top_level, counts_brackets_inside_a_value_without_matching_their_kinds_as_simdjson_skips_it) {
  const auto members = members_of(R"({"a":[1,2},"b":{"c":[}}})");
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0].value, "[1,2}");
  EXPECT_EQ(members[1].value, R"({"c":[}})");
}

TEST(json_top_level, refuses_nesting_beyond_the_bound_counting_the_object_itself) {
  const auto nested = [](std::size_t levels) {
    return R"({"a":)" + std::string(levels, '[') + std::string(levels, ']') + "}";
  };
  EXPECT_EQ(error_of(nested(3), 4), "");
  EXPECT_NE(error_of(nested(4), 4).find("nests too deeply"), std::string::npos);
  EXPECT_NE(error_of(nested(100000)).find("nests too deeply"), std::string::npos);
}

}  // namespace
}  // namespace kvr
