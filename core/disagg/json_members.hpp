#pragma once
/// Edits of a JSON object's top-level members over its bytes: the members left alone are
/// copied as sent (numbers, string escapes and key order untouched), only the edited ones are
/// written anew. Disaggregated requests change a few fields of the client's body this way
/// instead of parsing and re-serializing all of it.

#include <cstddef>
#include <expected>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace kvr {

/// One edit: remove `key` (no value), or set it to `json_value` (replacing it where present,
/// else appended unless `only_if_present`). `json_value` must be valid JSON text; it is
/// inserted as given.
struct member_edit {
  std::string_view key;
  std::optional<std::string_view> json_value;
  bool only_if_present = false;
};

/// The body with `edits` applied. A key that appears more than once (JSON parsers keep the
/// last) is replaced at its first place and dropped elsewhere. Fails, naming why, when
/// `object` is not one JSON object or nests deeper than `max_depth`.
[[nodiscard]] std::expected<std::string, std::string> edit_members(std::string_view object, std::span<const member_edit> edits,
                                                                   std::size_t max_depth = 512);

/// The raw bytes of top-level member `key`'s value (the last one when repeated); none when the
/// object lacks it or is not an object.
[[nodiscard]] std::optional<std::string_view> member_value(std::string_view object, std::string_view key,
                                                           std::size_t max_depth = 512);

}  // namespace kvr
