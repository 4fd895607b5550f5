#include "core/prompt/jinja/lexer.hpp"

#include <algorithm>

#include "core/prompt/jinja/error.hpp"

namespace kvr::jinja {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/// Jinja normalizes newlines to `\n` and drops one trailing newline (keep_trailing_newline off).
std::string normalize_source(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

/// Where the tag opened at `open` closes (the index of its closing delimiter), skipping string
/// literals and, as Jinja's lexer does, brackets inside expressions (`{{ {'a': {}} }}`).
std::size_t find_close(const std::string& s, std::size_t from, char kind) {
  const char close_first = kind == '{' ? '}' : kind;
  char quote = 0;
  int depth = 0;
  for (std::size_t i = from; i + 1 < s.size(); ++i) {
    const char c = s[i];
    if (quote != 0) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
      continue;
    }
    if (kind == '#') {
      if (c == '#' && s[i + 1] == '}') return i;
      continue;
    }
    if (c == '\'' || c == '"') quote = c;
    else if (depth == 0 && c == close_first && s[i + 1] == '}') return i;
    else if (c == '(' || c == '[' || c == '{') ++depth;
    else if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
  }
  return std::string::npos;
}

}  // namespace

std::vector<chunk> split_template(std::string_view raw_source) {
  const std::string source = normalize_source(raw_source);
  std::vector<chunk> chunks;
  std::size_t position = 0;
  int line = 1;
  bool strip_next = false;      // the previous tag ended with `-`
  bool trim_next_newline = false;  // trim_blocks after the previous block or comment tag
  auto count_lines = [&](std::size_t from, std::size_t to) {
    line += static_cast<int>(std::count(source.begin() + static_cast<std::ptrdiff_t>(from),
                                        source.begin() + static_cast<std::ptrdiff_t>(to), '\n'));
  };
  while (position <= source.size()) {
    std::size_t open = position;
    char kind = 0;
    while ((open = source.find('{', open)) != std::string::npos) {
      if (open + 1 < source.size() && (source[open + 1] == '{' || source[open + 1] == '%' || source[open + 1] == '#')) {
        kind = source[open + 1];
        break;
      }
      ++open;
    }
    const std::size_t text_end = open == std::string::npos ? source.size() : open;
    std::string text = source.substr(position, text_end - position);
    const int text_line = line;
    std::size_t consumed = 0;  // leading characters the previous tag's modifiers take
    if (strip_next) {
      consumed = static_cast<std::size_t>(std::find_if_not(text.begin(), text.end(), is_space) - text.begin());
    } else if (trim_next_newline && !text.empty() && text[0] == '\n') {
      consumed = 1;
    }
    const std::size_t text_start = position + consumed;
    const bool text_starts_line = text_start == 0 || source[text_start - 1] == '\n';
    text.erase(0, consumed);
    count_lines(position, text_end);
    if (open == std::string::npos) {
      if (!text.empty()) chunks.push_back({chunk::kind::text, std::move(text), text_line});
      break;
    }
    std::size_t inner = open + 2;
    const char left = inner < source.size() ? source[inner] : 0;
    if (left == '-' || left == '+') ++inner;
    const bool is_block = kind == '%' || kind == '#';
    if (left == '-') {
      while (!text.empty() && is_space(text.back())) text.pop_back();
    } else if (is_block && left != '+') {
      // lstrip_blocks: only spaces and tabs between the line start and the tag.
      const std::size_t newline = text.rfind('\n');
      const std::size_t tail = newline == std::string::npos ? 0 : newline + 1;
      if ((newline != std::string::npos || text_starts_line) &&
          text.find_first_not_of(" \t", tail) == std::string::npos)
        text.erase(tail);
    }
    if (!text.empty()) chunks.push_back({chunk::kind::text, std::move(text), text_line});

    const std::size_t close = find_close(source, inner, kind == '{' ? '{' : kind);
    if (close == std::string::npos)
      throw syntax_error(line, kind == '#' ? "unclosed comment" : kind == '%' ? "unclosed {% tag" : "unclosed {{ tag");
    std::size_t body_end = close;
    const char right = close > inner ? source[close - 1] : 0;
    if (right == '-' || right == '+') --body_end;
    strip_next = right == '-';
    trim_next_newline = is_block && right != '+';
    if (kind != '#') {
      chunks.push_back({kind == '{' ? chunk::kind::output : chunk::kind::statement,
                        source.substr(inner, body_end - inner), line});
    }
    count_lines(open, close + 2);
    position = close + 2;
  }
  return chunks;
}

}  // namespace kvr::jinja
