#include "core/disagg/json_members.hpp"

#include <array>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kvr {
namespace {

TEST(json_members, members_not_edited_keep_their_bytes_as_sent) {
  const std::string body = R"({"model": "m", "x": 1.50e0, "s": "\u00e9\n", "nested": {"a": [1, {"b": "}"}]}, "stream": true})";
  const std::array<member_edit, 1> edits{{{"stream", "false"}}};
  const auto out = edit_members(body, edits);
  ASSERT_TRUE(out) << out.error();
  EXPECT_EQ(*out, R"({"model": "m","x": 1.50e0,"s": "\u00e9\n","nested": {"a": [1, {"b": "}"}]},"stream":false})");
}

TEST(json_members, removes_keys_and_appends_the_ones_not_present) {
  const std::array<member_edit, 3> edits{{{"stream_options", std::nullopt}, {"max_tokens", "1"}, {"new", R"({"k":null})"}}};
  const auto out = edit_members(R"({"stream_options":{"include_usage":true},"max_tokens":500,"a":[]})", edits);
  ASSERT_TRUE(out);
  EXPECT_EQ(nlohmann::json::parse(*out), nlohmann::json::parse(R"({"max_tokens":1,"a":[],"new":{"k":null}})"));
}

TEST(json_members, a_repeated_key_is_replaced_once_and_its_other_copies_dropped) {
  const std::array<member_edit, 1> edits{{{"stream", "false"}}};
  const auto out = edit_members(R"({"stream":true,"a":1,"stream":true})", edits);
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, R"({"stream":false,"a":1})");
}

TEST(json_members, escaped_keys_are_matched_by_what_they_spell) {
  const std::array<member_edit, 1> edits{{{"stream", std::nullopt}}};
  const auto out = edit_members(R"({"str\u0065am":true,"b":2})", edits);
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, R"({"b":2})");
}

TEST(json_members, an_empty_object_takes_new_members) {
  const std::array<member_edit, 1> edits{{{"a", "1"}}};
  EXPECT_EQ(*edit_members(" { } ", edits), R"({"a":1})");
}

TEST(json_members, what_is_not_one_object_is_refused_with_a_reason) {
  const std::array<member_edit, 1> edits{{{"a", "1"}}};
  for (std::string_view bad : {"", "[1]", "{", R"({"a")", R"({"a":})", R"({"a":1 "b":2})", R"({"a":"x)", R"({a:1})",
                               R"({"a":1} {"b":2})", R"({"a":[1,2})"}) {
    const auto out = edit_members(bad, edits);
    EXPECT_FALSE(out) << bad;
  }
  std::string deep = R"({"a":)" + std::string(600, '[') + std::string(600, ']') + "}";
  const auto out = edit_members(deep, edits);
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().find("the body nests too deeply"), std::string::npos) << out.error();
}

TEST(json_members, member_value_reads_the_last_copy_of_a_key) {
  EXPECT_EQ(member_value(R"({"n": 2, "m": {"n": 5}, "n":3})", "n"), "3");
  EXPECT_EQ(member_value(R"({"m": {"n": 5}})", "n"), std::nullopt) << "only top-level members count";
  EXPECT_EQ(member_value("not json", "n"), std::nullopt);
}

}  // namespace
}  // namespace kvr
