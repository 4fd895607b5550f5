#pragma once
/// JSON text into nlohmann's ordered_json, through simdjson.
///
/// nlohmann's own parser appends every byte of a string one at a time: a chat's 17.5 KB message
/// cost a kv router more CPU in it than in tokenizing (`perf`, docs/benchmarks.md). simdjson
/// parses and validates the text (strings unescaped many bytes at a time), and the tree is
/// built from its result, each string copied whole. Its meaning is nlohmann's: a repeated key
/// keeps its first place and its last value, non-negative integers are unsigned; text simdjson
/// refuses (an integer past 64 bits, say) goes to nlohmann's parser, whose answer it is. Nesting: simdjson refuses past 1024 levels, and nlohmann's parser then takes it;
/// callers bound untrusted nesting first (core/common/json_shape).

#include <string_view>

#include <nlohmann/json.hpp>

namespace kvr {

/// The value `text` holds, or a discarded value (`is_discarded()`) if it is not valid JSON.
[[nodiscard]] nlohmann::ordered_json parse_ordered_json(std::string_view text);

}  // namespace kvr
