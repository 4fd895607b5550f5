#pragma once
/// The shape of an untrusted JSON text, read without parsing its values and without recursion:
/// how deep it nests and where its first value ends. Parsers and the code that walks parsed
/// JSON (chat templates over `tools`, `messages`) recurse per level, so a body is checked here
/// before anything walks it: nesting beyond a bound is refused, whatever follows the value is
/// trailing content.

#include <cstddef>
#include <expected>
#include <string>
#include <string_view>

namespace kvr {

/// Deepest nesting kvrouter accepts in JSON it did not write (bodies, cards, config files).
inline constexpr std::size_t max_json_depth = 512;

struct json_shape {
  std::size_t depth = 0;  ///< deepest nesting of arrays and objects
  std::size_t end = 0;    ///< one past the first value's last byte
};

enum class json_shape_error : std::uint8_t { too_deep, trailing_content, unterminated };

/// Scans `text`, which must hold exactly one value (whitespace around it allowed). Does not
/// validate the JSON (the parser does); only brackets outside strings are counted.
[[nodiscard]] std::expected<json_shape, json_shape_error> scan_json_shape(std::string_view text,
                                                                          std::size_t max_depth = max_json_depth);

/// A client-facing sentence for `error`.
[[nodiscard]] std::string describe(json_shape_error error, std::size_t max_depth = max_json_depth);

}  // namespace kvr
