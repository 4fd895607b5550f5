#pragma once
/// Untrusted JSON text into nlohmann's trees, through simdjson, its nesting bounded first.
///
/// This is how kvrouter parses JSON it did not write into trees: bodies, cards, config files,
/// etcd answers, workers' answers. (What a chat template renders, messages, tools, kwargs and
/// tool-call arguments, core/prompt/jinja/json_value reads straight into template values, its
/// depth bounded the same way.) Everything that walks the tree afterwards (copies, `dump`,
/// `from_json`) recurses per level, so the depth is checked before any tree exists (core/common/json_shape, no
/// recursion), and a text nesting deeper than the bound is refused, never walked.
///
/// nlohmann's own parser appends every byte of a string one at a time: a chat's 17.5 KB message
/// cost a kv router more CPU in it than in tokenizing (`perf`, docs/benchmarks.md). simdjson
/// parses and validates the text (strings unescaped many bytes at a time), and the tree is
/// built from its result, each string copied whole. Its meaning is nlohmann's: a repeated key
/// keeps its first place (ordered_json) and its last value, non-negative integers are unsigned;
/// text simdjson refuses (an integer past 64 bits, say) goes to nlohmann's parser, whose answer
/// it is.

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/common/json_shape.hpp"

namespace kvr {

enum class json_parse_error : std::uint8_t {
  not_json,  ///< not one valid JSON value (whitespace around it allowed)
  too_deep,  ///< valid or not, it nests deeper than the bound: refused unparsed
  too_large,  ///< what it holds would take more memory than the reader was given for it
};

/// The value `text` holds, as `Json` (`nlohmann::json` or `nlohmann::ordered_json`), if it
/// nests at most `max_depth` arrays and objects.
template <class Json>
[[nodiscard]] std::expected<Json, json_parse_error> parse_json(std::string_view text, std::size_t max_depth = max_json_depth);

extern template std::expected<nlohmann::json, json_parse_error> parse_json(std::string_view, std::size_t);
extern template std::expected<nlohmann::ordered_json, json_parse_error> parse_json(std::string_view, std::size_t);

/// `text` as an ordered_json (key order kept, as chat templates see it), or a discarded value
/// (`is_discarded()`) if it is not JSON or nests deeper than `max_json_depth`.
[[nodiscard]] nlohmann::ordered_json parse_ordered_json(std::string_view text);

/// The same, as a nlohmann::json.
[[nodiscard]] nlohmann::json parse_plain_json(std::string_view text);

/// A client-facing phrase for `error`, to follow what was refused: "is not valid JSON", "nests
/// deeper than 512 levels".
[[nodiscard]] std::string describe(json_parse_error error, std::size_t max_depth = max_json_depth);

}  // namespace kvr
