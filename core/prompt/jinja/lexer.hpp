#pragma once
/// Splits template source into text and tags, applying Jinja's whitespace control the way
/// HuggingFace configures it: `{%-` / `-%}` strip, `trim_blocks` drops the newline after a
/// block or comment tag, `lstrip_blocks` drops the indentation before one (`+` opts out), and
/// a single trailing newline of the source is dropped.

#include <string>
#include <string_view>
#include <vector>

namespace kvr::jinja {

struct chunk {
  enum class kind { text, output, statement };
  kind type = kind::text;
  std::string body;  ///< the text, or the tag's inside without delimiters and modifiers
  int line = 1;      ///< where it starts (1-based)
};

/// Throws `syntax_error` for an unclosed tag.
[[nodiscard]] std::vector<chunk> split_template(std::string_view source);

}  // namespace kvr::jinja
