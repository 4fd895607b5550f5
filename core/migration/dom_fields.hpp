#pragma once
/// Fields read off a simdjson document of one streamed event, as nlohmann would read them: the
/// answer's ledger and a gathered whole answer read the same members the same way.

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <simdjson.h>

namespace kvr::dom_fields {

using simdjson::dom::element;
using simdjson::dom::element_type;

/// `object`'s member `key` (a repeated key: its last value); none when missing or null.
[[nodiscard]] inline std::optional<element> member(element object, std::string_view key) {
  std::optional<element> found;
  for (const simdjson::dom::key_value_pair field : simdjson::dom::object(object))
    if (field.key == key) found = field.value;
  if (found && found->is_null()) return std::nullopt;
  return found;
}

[[nodiscard]] inline bool is_object(const std::optional<element>& value) { return value && value->type() == element_type::OBJECT; }

[[nodiscard]] inline std::string_view string_or_empty(const std::optional<element>& value) {
  return value && value->type() == element_type::STRING ? std::string_view(*value) : std::string_view();
}

/// A token id: an integer in [0, 2^32).
[[nodiscard]] inline std::optional<std::uint32_t> token_id(element value) {
  if (value.type() == element_type::INT64) {
    const auto id = std::int64_t(value);
    if (id >= 0 && id <= INT64_C(0xffffffff)) return static_cast<std::uint32_t>(id);
  } else if (value.type() == element_type::UINT64 && std::uint64_t(value) <= UINT32_MAX) {
    return static_cast<std::uint32_t>(std::uint64_t(value));
  }
  return std::nullopt;
}

/// Appends `ids` (a JSON array of token ids) to `out`; false if it is not one.
inline bool append_ids(element ids, std::vector<std::uint32_t>& out) {
  if (ids.type() != element_type::ARRAY) return false;
  for (const element id : simdjson::dom::array(ids)) {
    const auto value = token_id(id);
    if (!value) return false;
    out.push_back(*value);
  }
  return true;
}

}  // namespace kvr::dom_fields
