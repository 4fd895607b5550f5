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

/// The memory that values read from a client's text may take, shared by every read for one
/// request. A template value is 40 bytes and a dict member 72, where JSON can hold a value in
/// every 2 bytes: 11 million numbers in a tool call's arguments (32 MiB) took 19x their text.
/// The reader charges what it builds (an estimate of the heap it holds; a list's spare capacity
/// is not counted) and stops with `too_large` once the bytes are spent, before building the rest.
struct value_budget {
  std::size_t bytes_left = SIZE_MAX;

  /// What rendering one request may build from `text_bytes` of JSON: twice the text, plus
  /// 8 MiB that lets any ordinary chat through, however value-dense (a 10 000-turn chat of
  /// one-word messages holds 2.6 MB of values).
  [[nodiscard]] static value_budget for_text_of(std::size_t text_bytes) {
    return {.bytes_left = 2 * text_bytes + (std::size_t{8} << 20)};
  }
};

/// The value `text` holds (whitespace around it allowed), if it is one valid JSON value nesting
/// at most `max_depth` arrays and objects. The depth is checked before anything is built; the
/// memory built is charged to `budget`, if one is given.
[[nodiscard]] std::expected<value, json_parse_error> value_from_json_text(std::string_view text,
                                                                          std::size_t max_depth = max_json_depth,
                                                                          value_budget* budget = nullptr);

}  // namespace kvr::jinja
