#include "core/common/json_shape.hpp"

#include <gtest/gtest.h>

namespace kvr {
namespace {

TEST(json_shape, measures_depth_and_finds_where_the_value_ends) {
  const auto shape = scan_json_shape(R"( {"a": [1, {"b": [[]]}], "s": "]}[{"} )");
  ASSERT_TRUE(shape);
  EXPECT_EQ(shape->depth, 5u);
  EXPECT_TRUE(scan_json_shape(R"("a string with \" and ]")"));
  EXPECT_TRUE(scan_json_shape("42"));
  EXPECT_TRUE(scan_json_shape("true \n"));
}

TEST(json_shape, refuses_nesting_beyond_the_bound_without_recursing) {
  const std::string deep = std::string(20000, '[') + std::string(20000, ']');
  EXPECT_EQ(scan_json_shape(deep).error(), json_shape_error::too_deep);
  const std::string ok = std::string(512, '[') + std::string(512, ']');
  ASSERT_TRUE(scan_json_shape(ok));
  EXPECT_EQ(scan_json_shape(ok)->depth, 512u);
  const std::string deep_objects = [] {
    std::string s;
    for (int i = 0; i < 600; ++i) s += R"({"k":)";
    s += "1";
    for (int i = 0; i < 600; ++i) s += "}";
    return s;
  }();
  EXPECT_EQ(scan_json_shape(deep_objects).error(), json_shape_error::too_deep);
}

TEST(json_shape, anything_after_the_first_value_is_trailing_content) {
  for (const char* text : {R"({"a":1} {"b":2})", R"({"a":1}})", R"([1] x)", R"("s" "t")", "1 2", R"({} ])"})
    EXPECT_EQ(scan_json_shape(text).error(), json_shape_error::trailing_content) << text;
}

TEST(json_shape, a_value_cut_short_is_unterminated) {
  for (const char* text : {R"({"a":[1,2)", R"("open)", "", "   ", R"({"a":"\"})"})
    EXPECT_EQ(scan_json_shape(text).error(), json_shape_error::unterminated) << text;
}

}  // namespace
}  // namespace kvr
