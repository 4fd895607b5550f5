#pragma once
/// JSON text read straight into template values: the messages, tools, kwargs and tool-call
/// arguments a chat template renders.
///
/// Rendering used to read them into nlohmann trees first (through simdjson's DOM, about 15 bytes
/// per byte of text while it parses), copy each message to normalize it, and convert the copy:
/// three trees of every chat before the template saw one. Reading the text here builds the one
/// tree the template needs, each string copied once. Objects cost linear time whatever their
/// size: nlohmann's ordered_json and a dict's `set` look a key up by a scan, so a message of
/// 40 000 keys (430 KB) cost 4.6 s of CPU to render, quadratic in its keys; here a repeated key
/// is found by hashing once an object is large.
///
/// Meaning, as Python's `json.loads` and the engines' Jinja see it: a repeated key keeps its
/// first place and its last value; integers within 64 signed bits are ints, larger ones floats;
/// a number too large for a double is refused (nlohmann refuses it too), one too small is 0.
/// Strict JSON otherwise: valid UTF-8, no raw control characters, paired surrogates only.

#include <cstddef>
#include <expected>
#include <string_view>

#include "core/common/json_parse.hpp"
#include "core/prompt/jinja/value.hpp"

namespace kvr::jinja {

/// The value `text` holds (whitespace around it allowed), if it is one valid JSON value nesting
/// at most `max_depth` arrays and objects. The depth is checked before anything is built.
[[nodiscard]] std::expected<value, json_parse_error> value_from_json_text(std::string_view text,
                                                                          std::size_t max_depth = max_json_depth);

}  // namespace kvr::jinja
