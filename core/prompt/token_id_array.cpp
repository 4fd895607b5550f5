#include "core/prompt/token_id_array.hpp"

#include <bit>
#include <cstring>
#include <limits>

namespace kvr {
namespace {

constexpr std::uint64_t repeated(std::uint8_t byte) { return 0x0101010101010101ull * byte; }

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

/// The value of the `length` (1..8) digits in the low bytes of `digits`, one 0..9 per byte, the
/// most significant first in memory (the lowest byte). Shifted so that zeros lead, the digits
/// combine pairwise, then in fours, then all eight: three multiplications instead of eight.
std::uint32_t digits_value(std::uint64_t digits, unsigned length) {
  digits <<= 8 * (8 - length);
  digits = (digits * 10 + (digits >> 8)) & 0x00FF00FF00FF00FFull;
  digits = (digits * 100 + (digits >> 16)) & 0x0000FFFF0000FFFFull;
  digits = (digits * 10000 + (digits >> 32)) & 0xFFFFFFFFull;
  return static_cast<std::uint32_t>(digits);
}

/// Reads the integer at `p` (before `end`) into `id` and moves `p` past it; false if there is
/// none, or it is written with a leading zero, or it exceeds 2^32-1.
bool read_id(const char*& p, const char* end, std::uint32_t& id) {
  const char* const start = p;
  if (end - p >= 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, p, 8);
    const std::uint64_t digits = word ^ repeated('0');  // a digit becomes 0..9
    // Bit 7 of a byte set where it is not 0..9: above 0x7f already, or pushed there by adding 0x76.
    const std::uint64_t not_digit = (((digits & repeated(0x7f)) + repeated(0x76)) | digits) & repeated(0x80);
    if (not_digit != 0) {
      const unsigned length = static_cast<unsigned>(std::countr_zero(not_digit)) / 8;
      if (length == 0 || (length > 1 && *start == '0')) return false;
      id = digits_value(digits & ((1ull << (8 * length)) - 1), length);
      p += length;
      return true;
    }
  }
  // Eight digits or more, or the array's last bytes: one at a time, at most ten.
  std::uint64_t value = 0;
  while (p < end && is_digit(*p) && p - start <= 10) value = value * 10 + static_cast<unsigned>(*p++ - '0');
  const auto length = p - start;
  if (length == 0 || length > 10 || (length > 1 && *start == '0') || value > std::numeric_limits<std::uint32_t>::max())
    return false;
  id = static_cast<std::uint32_t>(value);
  return true;
}

}  // namespace

bool read_token_id_array(std::string_view value, std::vector<std::uint32_t>& out) {
  const char* p = value.data();
  const char* const end = p + value.size();
  if (p == end || *p != '[') return false;
  ++p;
  out.reserve(out.size() + value.size() / 4 + 8);  // ids of up to five digits and a comma: no regrowth
  for (;;) {
    while (p < end && is_space(*p)) ++p;
    std::uint32_t id = 0;
    if (!read_id(p, end, id)) return false;
    out.push_back(id);
    while (p < end && is_space(*p)) ++p;
    if (p == end) return false;
    if (*p == ',') {
      ++p;
      continue;
    }
    return *p == ']' && p + 1 == end;
  }
}

}  // namespace kvr
