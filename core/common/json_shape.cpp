#include "core/common/json_shape.hpp"

#include <cstdint>
#include <cstring>

#include <fmt/format.h>

namespace kvr {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

constexpr std::uint64_t ones = 0x0101010101010101ull;

/// Whether any byte of `word` equals `byte` (the classic zero-byte test on word ^ byte).
constexpr bool has_byte(std::uint64_t word, char byte) {
  const std::uint64_t v = word ^ (ones * static_cast<unsigned char>(byte));
  return ((v - ones) & ~v & (ones << 7)) != 0;
}

/// Eight bytes at `i` that the scan can step over whole: inside a string, no quote or
/// backslash; inside a container, no quote or bracket. Token-id arrays and prose are mostly
/// such runs.
bool skippable(std::string_view text, std::size_t i, bool in_string) {
  if (i + 8 > text.size()) return false;
  std::uint64_t word = 0;
  std::memcpy(&word, text.data() + i, 8);
  if (in_string) return !has_byte(word, '"') && !has_byte(word, '\\');
  return !has_byte(word, '"') && !has_byte(word, '[') && !has_byte(word, ']') && !has_byte(word, '{') && !has_byte(word, '}');
}

}  // namespace

std::expected<json_shape, json_shape_error> scan_json_shape(std::string_view text, std::size_t max_depth) {
  json_shape shape;
  std::size_t depth = 0;
  std::size_t i = 0;
  while (i < text.size() && is_space(text[i])) ++i;
  if (i == text.size()) return std::unexpected(json_shape_error::unterminated);
  bool in_string = false;
  bool started = false;
  for (; i < text.size(); ++i) {
    while (depth > 0 && skippable(text, i, in_string)) i += 8;
    if (i >= text.size()) break;
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped byte cannot end the string
      else if (c == '"') in_string = false;
      if (!in_string && depth == 0) break;  // a top-level string ended
      continue;
    }
    if (c == '"') {
      in_string = true;
      started = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return std::unexpected(json_shape_error::too_deep);
      shape.depth = std::max(shape.depth, depth);
      started = true;
    } else if (c == ']' || c == '}') {
      if (depth == 0) return std::unexpected(json_shape_error::trailing_content);
      if (--depth == 0) break;
    } else if (depth == 0 && started && is_space(c)) {
      --i;  // a top-level scalar ended
      break;
    } else {
      started = true;
    }
  }
  if (in_string || depth > 0) return std::unexpected(json_shape_error::unterminated);
  shape.end = std::min(i + 1, text.size());
  for (std::size_t j = shape.end; j < text.size(); ++j)
    if (!is_space(text[j])) return std::unexpected(json_shape_error::trailing_content);
  return shape;
}

std::string describe(json_shape_error error, std::size_t max_depth) {
  switch (error) {
    case json_shape_error::too_deep: return fmt::format("it nests deeper than {} levels", max_depth);
    case json_shape_error::trailing_content: return "trailing content after the value";
    case json_shape_error::unterminated: return "it ends before its value does";
  }
  return "malformed";
}

}  // namespace kvr
