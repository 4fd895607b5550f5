#pragma once
/// A JSON array of token ids read in one pass: commas found 16 or (AVX2) 32 bytes at a time,
/// ids converted from eight-byte loads, one at a time or (AVX2) four.
///
/// A completion's prompt of token ids is thousands of small integers: a general JSON parser
/// spends most of a kv router's CPU on it (simdjson indexes every comma, then each value goes
/// through its iterator). This reads exactly the common form, `[` integers `,` ... `]` with JSON
/// whitespace, each an unsigned integer in 0..2^32-1 written as JSON writes it (no sign, no
/// leading zero, no fraction or exponent), and declines everything else, so that a caller falls
/// back to the full parse for the rest and its errors stay that parse's.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace kvr {

/// Appends the ids of `value` (a JSON value's bytes, nothing around it) to `out` and returns
/// true if `value` is a non-empty array of token ids in the form above; returns false
/// otherwise, `out` then holding an unspecified prefix of them. Where `value` is readable
/// `padding` bytes past its end (a body in a buffer with simdjson's padding), every id is read
/// with one eight-byte load; without, the last few go a byte at a time.
[[nodiscard]] bool read_token_id_array(std::string_view value, std::vector<std::uint32_t>& out, std::size_t padding = 0);

}  // namespace kvr
