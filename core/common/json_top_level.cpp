#include "core/common/json_top_level.hpp"

#include <bit>
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace kvr {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_bracket_or_quote(char c) { return c == '"' || c == '[' || c == ']' || c == '{' || c == '}'; }

/// The first quote or backslash at or after `i` (the end if none): what can end a string.
std::size_t next_in_string(std::string_view s, std::size_t i) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
  for (; i + 16 <= s.size(); i += 16) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + i));
    const int hits = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(bytes, quote), _mm_cmpeq_epi8(bytes, backslash)));
    if (hits != 0) return i + static_cast<std::size_t>(std::countr_zero(static_cast<unsigned>(hits)));
  }
#endif
  while (i < s.size() && s[i] != '"' && s[i] != '\\') ++i;
  return i;
}

/// The first quote or bracket at or after `i` (the end if none): what matters inside a
/// container. Numbers, commas, colons and literals between them are stepped over.
std::size_t next_in_container(std::string_view s, std::size_t i) {
#if defined(__SSE2__)
  // '[' and ']' differ from '{' and '}' only in bit 5: one comparison each after setting it.
  const __m128i quote = _mm_set1_epi8('"'), open = _mm_set1_epi8('{'), close = _mm_set1_epi8('}'), bit5 = _mm_set1_epi8(0x20);
  for (; i + 16 <= s.size(); i += 16) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + i));
    const __m128i folded = _mm_or_si128(bytes, bit5);
    const __m128i hits =
        _mm_or_si128(_mm_cmpeq_epi8(bytes, quote), _mm_or_si128(_mm_cmpeq_epi8(folded, open), _mm_cmpeq_epi8(folded, close)));
    if (const int mask = _mm_movemask_epi8(hits); mask != 0)
      return i + static_cast<std::size_t>(std::countr_zero(static_cast<unsigned>(mask)));
  }
#endif
  while (i < s.size() && !is_bracket_or_quote(s[i])) ++i;
  return i;
}

class member_scanner {
 public:
  member_scanner(std::string_view text, std::size_t max_depth) : text_(text), max_depth_(max_depth) {}

  std::expected<void, std::string> members(std::vector<json_member>& out) {
    skip_space();
    if (!take('{')) return fail("the body is not a JSON object");
    skip_space();
    if (take('}')) return finish();
    for (;;) {
      skip_space();
      const std::size_t key_begin = at_;
      if (at_ >= text_.size() || text_[at_] != '"') return fail("a member's key is not a string");
      if (auto key = skip_string(); !key) return key;
      const std::string_view raw_key = text_.substr(key_begin, at_ - key_begin);
      skip_space();
      if (!take(':')) return fail("a member lacks its ':'");
      skip_space();
      const std::size_t value_begin = at_;
      if (auto value = skip_value(); !value) return value;
      out.push_back({raw_key, text_.substr(value_begin, at_ - value_begin)});
      skip_space();
      if (take(',')) continue;
      if (take('}')) return finish();
      return fail("members are not separated by ','");
    }
  }

 private:
  std::unexpected<std::string> fail(std::string_view why) const {
    return std::unexpected(std::string(why) + " (at byte " + std::to_string(at_) + ")");
  }
  std::expected<void, std::string> finish() {
    skip_space();
    if (at_ != text_.size()) return fail("the object is followed by more content");
    return {};
  }
  void skip_space() {
    while (at_ < text_.size() && is_space(text_[at_])) ++at_;
  }
  bool take(char c) {
    if (at_ >= text_.size() || text_[at_] != c) return false;
    ++at_;
    return true;
  }
  /// At an opening quote: to one past its closing quote.
  std::expected<void, std::string> skip_string() {
    const std::size_t opening = at_;
    ++at_;
    for (;;) {
      at_ = next_in_string(text_, at_);
      if (at_ >= text_.size()) {
        at_ = opening;
        return fail("a string is not terminated");
      }
      if (text_[at_] == '"') {
        ++at_;
        return {};
      }
      at_ += 2;  // a backslash and the byte it escapes
    }
  }
  std::expected<void, std::string> skip_value() {
    if (at_ >= text_.size()) return fail("a value is missing");
    const char c = text_[at_];
    if (c == '"') return skip_string();
    if (c == '[' || c == '{') return skip_container();
    const std::size_t start = at_;
    while (at_ < text_.size() && !is_space(text_[at_]) && text_[at_] != ',' && text_[at_] != '}' && text_[at_] != ']' &&
           !is_bracket_or_quote(text_[at_]) && text_[at_] != ':')
      ++at_;
    if (at_ == start) return fail("a value is missing");
    return {};
  }
  /// At a `[` or `{` inside the top-level object: to one past the bracket that closes it.
  /// Brackets are counted, not matched by kind, as simdjson skips a value: the full parse
  /// accepts whatever this accepts (the request fuzz target checks it).
  std::expected<void, std::string> skip_container() {
    std::size_t open = 0;  // containers open inside the top-level object
    for (;;) {
      at_ = next_in_container(text_, at_);
      if (at_ >= text_.size()) return fail("an array or object is not terminated");
      const char c = text_[at_];
      if (c == '"') {
        if (auto skipped = skip_string(); !skipped) return skipped;
        continue;
      }
      ++at_;
      if (c == '[' || c == '{') {
        if (++open >= max_depth_) return fail("the body nests too deeply");  // the top-level object is one level
        continue;
      }
      if (--open == 0) return {};  // a closing bracket: `open` > 0, the scan starts at an opening one
    }
  }

  std::string_view text_;
  std::size_t max_depth_;
  std::size_t at_ = 0;
};

}  // namespace

std::expected<void, std::string> scan_top_level_members(std::string_view body, std::vector<json_member>& out,
                                                        std::size_t max_depth) {
  out.clear();
  return member_scanner(body, max_depth).members(out);
}

}  // namespace kvr
