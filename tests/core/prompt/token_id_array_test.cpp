#include "core/prompt/token_id_array.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>
#include <string>

namespace kvr {
namespace {

std::vector<std::uint32_t> ids_of(std::string_view text) {
  std::vector<std::uint32_t> ids;
  EXPECT_TRUE(read_token_id_array(text, ids)) << text;
  return ids;
}

bool declines(std::string_view text) {
  std::vector<std::uint32_t> ids;
  return !read_token_id_array(text, ids);
}

TEST(token_id_array, reads_ids_of_every_width_as_a_json_parser_does_whatever_the_whitespace) {
  std::mt19937_64 rng(7);
  for (const char* separator : {",", ", ", " ,\n\t", "\r\n,  "}) {
    for (int round = 0; round < 200; ++round) {
      std::vector<std::uint32_t> expected;
      std::string text = round % 2 ? "[" : "[ ";
      const int count = 1 + static_cast<int>(rng() % 40);
      for (int i = 0; i < count; ++i) {
        const int digits = 1 + static_cast<int>(rng() % 10);  // 1..10 digits, from 0 up to 2^32-1
        std::uint64_t value = rng() % 10;
        for (int d = 1; d < digits; ++d) value = value * 10 + rng() % 10;
        if (digits > 1 && value < 10) value += 10;  // no leading zero: at least two digits
        value = std::min<std::uint64_t>(value, UINT32_MAX);
        expected.push_back(static_cast<std::uint32_t>(value));
        if (i > 0) text += separator;
        text += std::to_string(value);
      }
      text += round % 3 ? "]" : " ]";
      EXPECT_EQ(ids_of(text), expected) << text;
      EXPECT_EQ(nlohmann::json::parse(text).get<std::vector<std::uint32_t>>(), expected) << text;
    }
  }
}

TEST(token_id_array, appends_to_what_the_vector_holds) {
  std::vector<std::uint32_t> ids{9};
  ASSERT_TRUE(read_token_id_array("[0,10,4294967295]", ids));
  EXPECT_EQ(ids, (std::vector<std::uint32_t>{9, 0, 10, 4294967295u}));
}

TEST(token_id_array, declines_every_other_form_for_the_full_parse_to_judge) {
  for (const char* text : {"", "[", "]", "[]", "[ ]", "1", "[1", "[1,", "[1,]", "[,1]", "[1 2]", "[1]x", "[1] ", " [1]",
                           "[01]", "[00]", "[-1]", "[+1]", "[1.0]", "[1e3]", "[1E3]", "[\"1\"]", "[[1]]", "[1,[2]]",
                           "[null]", "[true]", "[4294967296]", "[9999999999]", "[12345678901]", "[123456789012345678901234]",
                           "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,2a]", "[100000000,200000000,3000000000x]"}) {
    EXPECT_TRUE(declines(text)) << text;
  }
}

TEST(token_id_array, an_id_ending_exactly_at_eight_bytes_or_at_the_arrays_end_is_read_whole) {
  EXPECT_EQ(ids_of("[1234567]"), (std::vector<std::uint32_t>{1234567}));      // the eighth byte is the bracket
  EXPECT_EQ(ids_of("[12345678]"), (std::vector<std::uint32_t>{12345678}));    // eight digits: read one at a time
  EXPECT_EQ(ids_of("[123456789,7]"), (std::vector<std::uint32_t>{123456789, 7}));
  EXPECT_EQ(ids_of("[7,4294967295]"), (std::vector<std::uint32_t>{7, 4294967295u}));
}

TEST(token_id_array, two_commas_in_a_row_are_declined_wherever_they_fall_against_the_64_byte_blocks) {
  for (std::size_t at = 2; at < 140; at += 2) {
    std::string inside;
    for (int i = 0; i < 80; ++i) inside += "1,";
    inside.pop_back();
    inside.insert(at - 1, ",");  // after the comma at `at - 1`: ",," across every block boundary in turn
    EXPECT_TRUE(declines("[" + inside + "]")) << at;
  }
}

TEST(token_id_array, reads_the_same_with_or_without_padding_past_the_array) {
  std::string text = "[1,22,333,4444,55555,666666,7777777,88888888,999999999,4294967295]";
  const std::vector<std::uint32_t> expected{1, 22, 333, 4444, 55555, 666666, 7777777, 88888888, 999999999, 4294967295u};
  EXPECT_EQ(ids_of(text), expected);
  text.reserve(text.size() + 64);
  std::vector<std::uint32_t> padded;
  ASSERT_TRUE(read_token_id_array(text, padded, text.capacity() - text.size()));
  EXPECT_EQ(padded, expected);
  std::vector<std::uint32_t> leading_zero;
  EXPECT_FALSE(read_token_id_array("[1,2,03]", leading_zero, 0));
  EXPECT_FALSE(read_token_id_array("[0012345678,2]", leading_zero, 0));
}

/// Long compact arrays, as clients send them, with and without padding: the ids go four at a
/// time where the CPU has AVX2 (an id of nine digits or more, or the array's end, sends its
/// four one at a time), and must read as a JSON parser reads them; a leading zero in any
/// position of a four is declined.
TEST(token_id_array, long_compact_arrays_read_as_a_json_parser_reads_them_in_every_position) {
  std::mt19937_64 rng(20261203);
  for (int round = 0; round < 300; ++round) {
    std::vector<std::uint32_t> expected;
    std::string text = "[";
    const int count = 1 + static_cast<int>(rng() % 300);
    const int max_digits = round % 3 == 0 ? 10 : 6;  // mostly vocabulary-sized ids
    for (int i = 0; i < count; ++i) {
      const int digits = 1 + static_cast<int>(rng() % max_digits);
      std::uint64_t value = 1 + rng() % 9;
      for (int d = 1; d < digits; ++d) value = value * 10 + rng() % 10;
      if (digits == 1 && rng() % 4 == 0) value = 0;
      value = std::min<std::uint64_t>(value, UINT32_MAX);
      expected.push_back(static_cast<std::uint32_t>(value));
      text += (i ? "," : "") + std::to_string(value);
    }
    text += "]";
    ASSERT_EQ(nlohmann::json::parse(text).get<std::vector<std::uint32_t>>(), expected);
    EXPECT_EQ(ids_of(text), expected) << text;
    std::string padded = text;
    padded.reserve(padded.size() + 64);
    std::vector<std::uint32_t> ids;
    ASSERT_TRUE(read_token_id_array(padded, ids, padded.capacity() - padded.size())) << text;
    EXPECT_EQ(ids, expected) << text;
  }
  for (int position = 0; position < 12; ++position) {
    std::string text = "[";
    for (int i = 0; i < 12; ++i) text += (i ? "," : "") + std::string(i == position ? "0" : "") + std::to_string(1000 + i);
    text += "]";
    EXPECT_TRUE(declines(text)) << text;
  }
}

}  // namespace
}  // namespace kvr
