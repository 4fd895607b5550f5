#pragma once
/// The top-level members of a JSON object body, found without reading the values they hold.
///
/// The object's own syntax is read strictly (whitespace, `{`, quoted keys, `:`, `,`, `}`, and
/// nothing after it); each value is stepped over by its strings and brackets, sixteen bytes at a
/// time where a stretch holds no quote or bracket (token-id arrays and prose are mostly such
/// stretches), nesting bounded and brackets counted. What is inside a value is not
/// validated: this is for routers that forward the body and judge only a few of its members
/// (core/prompt/openai's envelope), where a full parse would cost more than proxying it.

#include <cstddef>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/json_shape.hpp"

namespace kvr {

struct json_member {
  std::string_view raw_key;  ///< as written, quotes included (escapes not decoded)
  std::string_view value;    ///< the value's bytes
};

/// The members of the object `body` holds, in order (repeated keys repeated), into `out`
/// (cleared first). Fails with a sentence naming what is wrong and where.
[[nodiscard]] std::expected<void, std::string> scan_top_level_members(std::string_view body, std::vector<json_member>& out,
                                                                      std::size_t max_depth = max_json_depth);

}  // namespace kvr
