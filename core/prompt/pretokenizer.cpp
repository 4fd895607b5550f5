#include "core/prompt/pretokenizer.hpp"

#include <array>
#include <bit>
#include <cstring>

#include <utf8proc.h>

namespace kvr {
namespace {

constexpr std::string_view qwen2_regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view llama3_regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view gpt2_regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

constexpr std::array<char_class, 128> ascii_classes = [] {
  std::array<char_class, 128> table{};
  for (int c = 0; c < 128; ++c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) table[c] = char_class::letter;
    else if (c >= '0' && c <= '9') table[c] = char_class::number;
    else if (c == ' ' || (c >= '\t' && c <= '\r')) table[c] = char_class::space;
    else table[c] = char_class::other;
  }
  return table;
}();

/// White_Space beyond ASCII (Unicode 15 PropList.txt).
constexpr bool wide_space(std::uint32_t cp) {
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

char_class wide_class(std::uint32_t cp) {
  if (wide_space(cp)) return char_class::space;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: return char_class::letter;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO: return char_class::number;
    default: return char_class::other;
  }
}

/// Two-byte sequences (U+0080..U+07FF: Latin, Greek, Cyrillic, Hebrew, Arabic) are common
/// enough in prose to deserve a table of their own, filled on first use.
const std::array<char_class, 0x800>& two_byte_classes() {
  static const std::array<char_class, 0x800> table = [] {
    std::array<char_class, 0x800> t{};
    for (std::uint32_t cp = 0x80; cp < 0x800; ++cp) t[cp] = wide_class(cp);
    return t;
  }();
  return table;
}

/// One code point of valid UTF-8.
struct code_point {
  char_class cls;
  std::uint8_t size;
};

/// The class and length of the code point at `i` (valid UTF-8 assumed).
inline code_point at(std::string_view t, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(t[i]);
  if (b0 < 0x80) return {ascii_classes[b0], 1};
  const auto b1 = static_cast<unsigned char>(t[i + 1]) & 0x3Fu;
  if (b0 < 0xE0) return {two_byte_classes()[((b0 & 0x1Fu) << 6) | b1], 2};
  const auto b2 = static_cast<unsigned char>(t[i + 2]) & 0x3Fu;
  if (b0 < 0xF0) return {wide_class(((b0 & 0x0Fu) << 12) | (b1 << 6) | b2), 3};
  const auto b3 = static_cast<unsigned char>(t[i + 3]) & 0x3Fu;
  return {wide_class(((b0 & 0x07u) << 18) | (b1 << 12) | (b2 << 6) | b3), 4};
}

inline bool is_cr_or_lf(char c) { return c == '\r' || c == '\n'; }

/// How many of the eight bytes of `word` (in memory order) are ASCII letters before the first
/// that is not: each byte's high bit says "letter", computed for all eight at once (no carry
/// crosses a byte: the high bits are cleared before the additions).
inline std::size_t ascii_letters_in(std::uint64_t word) {
  static_assert(std::endian::native == std::endian::little, "the first byte in memory is the lowest");
  constexpr std::uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
  const std::uint64_t folded = (word & ~highs) | (0x20 * ones);  // upper case folded to lower
  const std::uint64_t from_a = folded + (0x80 - 'a') * ones;     // high bit: byte >= 'a'
  const std::uint64_t past_z = folded + (0x80 - 'z' - 1) * ones;  // high bit: byte > 'z'
  const std::uint64_t letters = from_a & ~past_z & ~word & highs;
  const std::uint64_t others = ~letters & highs;
  return others == 0 ? 8 : static_cast<std::size_t>(__builtin_ctzll(others)) / 8;
}

/// Past the ASCII letters from `i`, eight bytes a step (the last few bytes are left to the caller).
inline std::size_t skip_ascii_letters(std::string_view t, std::size_t i) {
  while (i + 8 <= t.size()) {
    std::uint64_t word = 0;
    std::memcpy(&word, t.data() + i, 8);
    const std::size_t n = ascii_letters_in(word);
    i += n;
    if (n < 8) break;
  }
  return i;
}

/// The end of the run of `cls` code points from `i`.
inline std::size_t run_end(std::string_view t, std::size_t i, char_class cls) {
  if (cls == char_class::letter) i = skip_ascii_letters(t, i);
  while (i < t.size()) {
    const auto b = static_cast<unsigned char>(t[i]);
    if (b < 0x80) {
      if (ascii_classes[b] != cls) break;
      ++i;
      continue;
    }
    const code_point c = at(t, i);
    if (c.cls != cls) break;
    i += c.size;
  }
  return i;
}

/// The length of a contraction (`s`, `t`, `re`, `ve`, `m`, `ll`, `d`) at `i`, just after an
/// apostrophe; 0 if none. Caseless as PCRE2 folds under UCP: `s` also matches U+017F (ſ).
std::size_t contraction(std::string_view t, std::size_t i, bool caseless) {
  auto is = [&](std::size_t k, char lower) {
    if (i + k >= t.size()) return false;
    const char c = t[i + k];
    return c == lower || (caseless && c == lower - 'a' + 'A');
  };
  if (is(0, 's') || is(0, 't') || is(0, 'm') || is(0, 'd')) return 1;
  if (caseless && i + 1 < t.size() && t[i] == '\xC5' && t[i + 1] == '\xBF') return 2;  // ſ
  if ((is(0, 'r') && is(1, 'e')) || (is(0, 'v') && is(1, 'e')) || (is(0, 'l') && is(1, 'l'))) return 2;
  return 0;
}

/// The whitespace alternatives both families end with, for a space at `i`:
/// (`\s*[\r\n]+` when `newline_run`) `\s+(?!\S)`, `\s+`.
std::size_t whitespace_piece(std::string_view t, std::size_t i, bool newline_run) {
  std::size_t end = i, last_start = i, count = 0, after_newline = 0;
  while (end < t.size()) {
    const code_point c = at(t, end);
    if (c.cls != char_class::space) break;
    if (is_cr_or_lf(t[end])) after_newline = end + 1;
    last_start = end;
    end += c.size;
    ++count;
  }
  if (newline_run && after_newline != 0) return after_newline;  // `\s*` backs off to the last CR/LF
  if (end == t.size() || count == 1) return end;                // nothing follows, or a lone space
  return last_start;                                            // leave the last space to the word
}

/// The end of a word whose first letters are ASCII: eight bytes a step while it stays so.
inline std::size_t word_end(std::string_view t, std::size_t i) {
  i = skip_ascii_letters(t, i);
  if (i < t.size() && static_cast<unsigned char>(t[i]) < 0x80 && ascii_classes[static_cast<unsigned char>(t[i])] != char_class::letter)
    return i;
  return run_end(t, i, char_class::letter);  // a non-ASCII letter, or the last bytes
}

[[gnu::noinline]] std::size_t qwen_piece_slow(std::string_view t, std::size_t i, bool three_digits) {
  if (t[i] == '\'')
    if (const std::size_t n = contraction(t, i + 1, true)) return i + 1 + n;
  const code_point first = at(t, i);
  if (first.cls == char_class::letter) return run_end(t, i + first.size, char_class::letter);
  const std::size_t next = i + first.size;
  if (first.cls != char_class::number && !is_cr_or_lf(t[i]) && next < t.size() && at(t, next).cls == char_class::letter)
    return run_end(t, next, char_class::letter);
  if (first.cls == char_class::number) {
    std::size_t end = next;
    for (int more = three_digits ? 2 : 0; more > 0 && end < t.size(); --more) {
      const code_point c = at(t, end);
      if (c.cls != char_class::number) break;
      end += c.size;
    }
    return end;
  }
  std::size_t start = i;
  if (t[i] == ' ' && next < t.size() && at(t, next).cls == char_class::other) start = next;
  if (at(t, start).cls == char_class::other) {
    std::size_t end = run_end(t, start, char_class::other);
    while (end < t.size() && is_cr_or_lf(t[end])) ++end;
    return end;
  }
  return whitespace_piece(t, i, true);
}

/// Prose is mostly " word", "word" and punctuation in ASCII: decided on one or two bytes
/// here, inlined; everything else in qwen_piece_slow.
inline std::size_t qwen_piece(std::string_view t, std::size_t i, bool three_digits) {
  if (const auto b0 = static_cast<unsigned char>(t[i]); b0 < 0x80 && b0 != '\'') {
    const char_class cls = ascii_classes[b0];
    if (cls == char_class::letter) return word_end(t, i + 1);
    if (cls != char_class::number && b0 != '\r' && b0 != '\n' && i + 1 < t.size()) {
      const auto b1 = static_cast<unsigned char>(t[i + 1]);
      if (b1 < 0x80 && ascii_classes[b1] == char_class::letter) return word_end(t, i + 2);
      // Punctuation followed by ASCII that is not a letter (", ", ".\n", "),"): ` ?[^\s\p{L}\p{N}]+[\r\n]*`.
      if (cls == char_class::other && b1 < 0x80) {
        std::size_t end = i + 1;
        while (end < t.size() && static_cast<unsigned char>(t[end]) < 0x80 &&
               ascii_classes[static_cast<unsigned char>(t[end])] == char_class::other)
          ++end;
        if (end == t.size() || static_cast<unsigned char>(t[end]) < 0x80) {  // a non-ASCII byte may continue the run
          while (end < t.size() && is_cr_or_lf(t[end])) ++end;
          return end;
        }
      }
    }
  }
  return qwen_piece_slow(t, i, three_digits);
}

std::size_t gpt2_piece(std::string_view t, std::size_t i) {
  if (t[i] == '\'')
    if (const std::size_t n = contraction(t, i + 1, false)) return i + 1 + n;
  const std::size_t start = t[i] == ' ' && i + 1 < t.size() ? i + 1 : i;
  const code_point c = at(t, start);
  if (c.cls != char_class::space) return run_end(t, start + c.size, c.cls);
  return whitespace_piece(t, i, false);
}

}  // namespace

char_class classify(std::uint32_t cp) { return cp < 0x80 ? ascii_classes[cp] : wide_class(cp); }

std::optional<split_pattern> known_split_pattern(std::string_view regex) {
  if (regex == qwen2_regex) return split_pattern::qwen2;
  if (regex == llama3_regex) return split_pattern::llama3;
  if (regex == gpt2_regex) return split_pattern::gpt2;
  return std::nullopt;
}

std::string_view split_regex(split_pattern pattern) {
  switch (pattern) {
    case split_pattern::gpt2: return gpt2_regex;
    case split_pattern::qwen2: return qwen2_regex;
    case split_pattern::llama3: return llama3_regex;
  }
  return {};
}

std::size_t piece_ends(split_pattern pattern, std::string_view text, std::size_t at, std::span<std::size_t> ends) {
  std::size_t count = 0;
  auto fill = [&](auto piece) {
    while (at < text.size() && count < ends.size()) at = ends[count++] = piece(at);
  };
  switch (pattern) {
    case split_pattern::gpt2: fill([&](std::size_t i) { return gpt2_piece(text, i); }); break;
    case split_pattern::qwen2: fill([&](std::size_t i) { return qwen_piece(text, i, false); }); break;
    case split_pattern::llama3: fill([&](std::size_t i) { return qwen_piece(text, i, true); }); break;
  }
  return count;
}

bool valid_utf8(std::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    if (i + 8 <= n) {  // eight ASCII bytes at a time
      std::uint64_t word = 0;
      std::memcpy(&word, p + i, 8);
      if ((word & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    const unsigned char b0 = p[i];
    if (b0 < 0x80) {
      ++i;
      continue;
    }
    auto continuation = [&](std::size_t k) { return i + k < n && (p[i + k] & 0xC0) == 0x80; };
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      if (!continuation(1)) return false;
      i += 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      if (!continuation(1) || !continuation(2)) return false;
      if (b0 == 0xE0 && p[i + 1] < 0xA0) return false;   // overlong
      if (b0 == 0xED && p[i + 1] >= 0xA0) return false;  // surrogate
      i += 3;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      if (!continuation(1) || !continuation(2) || !continuation(3)) return false;
      if (b0 == 0xF0 && p[i + 1] < 0x90) return false;   // overlong
      if (b0 == 0xF4 && p[i + 1] >= 0x90) return false;  // past U+10FFFF
      i += 4;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace kvr
