#include "core/prompt/pretokenizer.hpp"

#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/core/test_files.hpp"
#include "tests/support/pcre2_pieces.hpp"

namespace kvr {
namespace {

using kvr::testing::builtin_piece_ends;
using kvr::testing::pcre2_piece_ends;

std::string regex_of(const std::string& tokenizer_json) {
  const auto document = nlohmann::json::parse(kvr::testing::read_file(tokenizer_json));
  return document["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"].get<std::string>();
}

struct known {
  split_pattern pattern;
  std::string regex;
};

const std::vector<known>& known_patterns() {
  static const std::vector<known> all = {
      {split_pattern::qwen2, regex_of(std::string(KVR_TOKENIZER_DIR) + "/qwen3/tokenizer.json")},
      {split_pattern::llama3, std::string(split_regex(split_pattern::llama3))},
      {split_pattern::gpt2, std::string(split_regex(split_pattern::gpt2))},
  };
  return all;
}

std::string utf8(std::uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

void expect_same_pieces(std::string_view text) {
  ASSERT_TRUE(valid_utf8(text));
  for (const known& k : known_patterns())
    EXPECT_EQ(builtin_piece_ends(k.pattern, text), pcre2_piece_ends(k.regex, text))
        << "pattern " << static_cast<int>(k.pattern) << ", text " << nlohmann::json(std::string(text)).dump();
}

TEST(pretokenizer, the_three_families_patterns_are_recognised_and_others_are_not) {
  for (const known& k : known_patterns()) EXPECT_EQ(known_split_pattern(k.regex), k.pattern);
  EXPECT_FALSE(known_split_pattern(R"(\p{L}+|\s+)"));
  EXPECT_FALSE(known_split_pattern(known_patterns()[0].regex + "|x"));
}

TEST(pretokenizer, splits_the_hard_cases_where_pcre2_does) {
  for (const char* text : {
           "Hello, world! I'll see you're fine, DON'T 'S 'Ll 're'sam",
           "numbers 1 12 123 1234 12345 3.14159 1,000,000 v2.0",
           "  leading spaces, trailing spaces   ",
           "a\n\nb\r\n\r\n  \n  c \n",
           "\t\ttabs\tbefore\twords \t\n",
           "x  \n",
           "   ",
           "\n",
           "end with space ",
           "punctuation!!! ...and ??? -- (parens) [brackets] {braces} <tags/>\n\n",
           "   !!!\n\n\nnext",
           "café naïve Ærø ñandú Straße İstanbul ſ 'ſ 'ſt",
           "日本語のテキスト、中文文本。한국어 텍스트",
           "emoji 👍🏽 🎉🎉 family 👨‍👩‍👧",
           "combining e\u0301 a\u0308 \u0301alone",
           "nbsp\u00a0here\u3000ideographic\u2003em\u2028line\u0085nel",
           "Arabic ١٢٣ digits ٤٥٦٧ and Devanagari ४२",
           "Roman Ⅻ numerals ½ fractions ²³ superscripts",
           "mixed123abc 123abc abc123 _under_score_",
           "'",
           "''s",
           " 's",
           "code: if (x == 1) { return y->z; } // comment\n    indented();\n",
       })
    expect_same_pieces(text);
}

TEST(pretokenizer, splits_every_corpus_text_where_pcre2_does) {
  const auto corpus = nlohmann::json::parse(kvr::testing::read_file(std::string(KVR_TEST_DATA_DIR) + "/tokenizer/corpus.json"))["texts"];
  for (const auto& text : corpus) expect_same_pieces(text.get<std::string>());
}

/// Random texts over an alphabet of every class and the characters the patterns single out.
TEST(pretokenizer, splits_random_texts_of_mixed_classes_where_pcre2_does) {
  const std::vector<std::uint32_t> alphabet = {
      'a', 'Z', 'q', 's', 'S', 't', 'T', 'r', 'e', 'v', 'm', 'l', 'L', 'd', 'D', '0', '7', '\'', ' ', ' ', ' ', '\t',
      '\n', '\r', '\v', '\f', '.', ',', '!', '-', '_', '(', '"', 0x17F, 0xE9, 0x301, 0x308, 0xA0, 0x85, 0x3000, 0x2003,
      0x2028, 0x2029, 0x202F, 0x205F, 0x1680, 0x4E2D, 0x65E5, 0xAC00, 0x0661, 0x0966, 0x216B, 0xBD, 0xB2, 0x1F44D,
      0x1F3FD, 0x200D, 0x2019, 0x00AD, 0x0300, 0x05D0, 0x0627, 0x0E01, 0x10400, 0x1D7CE};
  std::mt19937 random(20261201);
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1), length(1, 40);
  for (int round = 0; round < 20000; ++round) {
    std::string text;
    for (std::size_t n = length(random); n > 0; --n) text += utf8(alphabet[pick(random)]);
    ASSERT_TRUE(kvr::testing::classes_agree_with_pcre2(text));
    expect_same_pieces(text);
    if (::testing::Test::HasFailure()) return;
  }
}

/// Where the two disagree on a code point's class, PCRE2's tables are the older ones.
TEST(pretokenizer, classes_differ_from_pcre2_only_where_unicode_15_changed_them) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* unassigned = pcre2_compile(reinterpret_cast<PCRE2_SPTR>("\\p{Cn}"), PCRE2_ZERO_TERMINATED,
                                         PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &error, &offset, nullptr);
  pcre2_match_data* match = pcre2_match_data_create(2, nullptr);
  int differing = 0;
  for (std::uint32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp < 0xE000) continue;
    const std::string text = utf8(cp);
    if (kvr::testing::classes_agree_with_pcre2(text)) continue;
    ++differing;
    const bool unassigned_in_pcre2 =
        pcre2_match(unassigned, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, 0, match, nullptr) > 0;
    EXPECT_TRUE(cp == 0x180E || unassigned_in_pcre2) << "U+" << std::hex << cp;
  }
  EXPECT_LT(differing, 5000);
  pcre2_match_data_free(match);
  pcre2_code_free(unassigned);
}

TEST(pretokenizer, valid_utf8_refuses_overlongs_surrogates_truncations_and_beyond_unicode) {
  EXPECT_TRUE(valid_utf8(""));
  EXPECT_TRUE(valid_utf8("plain ascii, longer than eight bytes"));
  EXPECT_TRUE(valid_utf8("caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x91\x8D \xF4\x8F\xBF\xBF"));
  for (const char* bad : {"\x80", "a\xC0\xAF", "\xC1\xBF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF0\x80\x80\xAF", "\xF4\x90\x80\x80",
                          "\xF5\x80\x80\x80", "\xFF", "\xC3", "abcdefgh\xE6\x97", "\xF0\x9F\x91"})
    EXPECT_FALSE(valid_utf8(bad)) << nlohmann::json(std::string(bad)).dump(-1, ' ', true);
}

}  // namespace
}  // namespace kvr
