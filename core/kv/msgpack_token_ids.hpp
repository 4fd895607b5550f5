#pragma once
/// A msgpack array's token ids: unsigned integers below 2^32 as positive fixints, uint8, uint16
/// or uint32. They are most of a BlockStored payload's bytes (16 per block, 3 to 5 bytes each).
///
/// Why a vector reader: read one at a time, every id's width is a branch on its marker byte,
/// and on a vocabulary of 150 000 ids the widths of consecutive ids are a coin toss (uint16
/// below 65 536, uint32 above), so half the branches miss. With AVX-512 VBMI the reader finds
/// where the next 16 ids start in a 64-byte window without branching: each byte's "next id
/// starts here" position, composed with itself to jump 2, 4 and 8 ids ahead, and the start of
/// id k reached through k's binary digits. A byte shuffle then gathers the 16 values.
/// Machines without VBMI, and the last bytes of a payload, take the one-at-a-time loop.

#include <cstdint>
#include <span>

namespace kvr {

/// Reads `out.size()` token ids from the bytes at [p, end). Returns the position after the
/// last one, or nullptr when an element is not such an integer (any other format, including a
/// wider or signed integer) or the bytes end first. Reads no byte at or past `end`.
[[nodiscard]] const std::uint8_t* read_msgpack_token_ids(const std::uint8_t* p, const std::uint8_t* end,
                                                         std::span<std::uint32_t> out);

/// The same, one id at a time, whatever the machine: the reference the vector reader is
/// tested against.
[[nodiscard]] const std::uint8_t* read_msgpack_token_ids_one_by_one(const std::uint8_t* p, const std::uint8_t* end,
                                                                    std::span<std::uint32_t> out);

}  // namespace kvr
