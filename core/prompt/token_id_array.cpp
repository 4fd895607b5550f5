#include "core/prompt/token_id_array.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <span>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define KVR_TOKEN_IDS_AVX2 1
#endif

namespace kvr {
namespace {

constexpr std::uint64_t repeated(std::uint8_t byte) { return 0x0101010101010101ull * byte; }

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

/// The value of eight digits, one 0..9 per byte, the most significant first in memory (the
/// lowest byte); fewer digits are shifted up first, so that zeros lead. The digits combine
/// pairwise, then in fours, then all eight, each step one multiplication: by 1 + 10 * 2^8, a
/// byte gains ten times the byte below it (the more significant digit); 1 + 100 * 2^16 and
/// 1 + 10000 * 2^32 do the same to pairs and fours.
std::uint32_t digits_value(std::uint64_t digits) {
  digits = ((digits * (1 + (10ull << 8))) >> 8) & 0x00FF00FF00FF00FFull;
  digits = ((digits * (1 + (100ull << 16))) >> 16) & 0x0000FFFF0000FFFFull;
  return static_cast<std::uint32_t>((digits * (1 + (10000ull << 32))) >> 32);
}

/// The id of the `length` digits at `begin`, one at a time (past eight, or where an eight-byte
/// load would overrun); false past 2^32-1.
bool long_id(const char* begin, std::size_t length, std::uint32_t& id) {
  if (length > 10) return false;
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < length; ++i) value = value * 10 + static_cast<unsigned>(begin[i] - '0');
  if (value > std::numeric_limits<std::uint32_t>::max()) return false;
  id = static_cast<std::uint32_t>(value);
  return true;
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
      id = digits_value(digits << (64 - 8 * length));
      p += length;
      return true;
    }
  }
  // Eight digits or more, or the array's last bytes: one at a time, at most ten.
  while (p < end && is_digit(*p) && p - start <= 10) ++p;
  const auto length = static_cast<std::size_t>(p - start);
  return length != 0 && !(length > 1 && *start == '0') && long_id(start, length, id);
}

/// Bits of the 64 bytes at `p` (of `size` readable, up to 64): which are commas, which are
/// neither commas nor digits (a bit per byte, the first byte lowest).
struct byte_classes {
  std::uint64_t commas = 0;
  std::uint64_t others = 0;
};

byte_classes classify(const char* p, std::size_t size) {
  byte_classes classes;
  std::size_t i = 0;
#if defined(__SSE2__)
  const __m128i comma = _mm_set1_epi8(','), zero = _mm_set1_epi8('0'), nine = _mm_set1_epi8('9');
  for (; i + 16 <= size; i += 16) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    // A digit is '0'..'9': (byte - '0') <= 9 unsigned, as max(byte, '0') == byte && min(byte, '9') == byte.
    const __m128i digit = _mm_and_si128(_mm_cmpeq_epi8(_mm_max_epu8(bytes, zero), bytes), _mm_cmpeq_epi8(_mm_min_epu8(bytes, nine), bytes));
    const __m128i is_comma = _mm_cmpeq_epi8(bytes, comma);
    const auto commas = static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(is_comma)));
    const auto digits = static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(digit)));
    classes.commas |= commas << i;
    classes.others |= (~(commas | digits) & 0xffffull) << i;
  }
#endif
  for (; i < size; ++i) {
    const std::uint64_t bit = 1ull << i;
    if (p[i] == ',') classes.commas |= bit;
    else if (!is_digit(p[i])) classes.others |= bit;
  }
  return classes;
}

#if defined(KVR_TOKEN_IDS_AVX2)
/// The ids from the first on converted four at a time, all in 256-bit registers: where each
/// begins and how long it is come from four ends and the one before them, the four eight-byte
/// words from one gather, then the same shift as `digits_value`'s caller and the digits combined
/// in pairs, fours and eights by two multiply-adds and one multiplication. Stops before a four
/// holding an id longer than eight digits or reaching past `loadable`; returns the index it
/// stopped at, the rest left to the scalar loop. Compiled for AVX2 and called only where the
/// CPU has it.
__attribute__((target("avx2"))) std::size_t convert_in_fours(const char* text, std::span<const std::uint32_t> ends,
                                                             const char* loadable, std::uint32_t* ids,
                                                             std::uint64_t& leading_zero) {
  const __m256i zeros = _mm256_set1_epi8('0');
  const __m256i tens = _mm256_set1_epi16(0x010A);          // bytes 10, 1: a digit pair
  const __m256i hundreds = _mm256_set1_epi32(0x00010064);  // words 100, 1: a pair of pairs
  const __m256i ten_thousand = _mm256_set1_epi64x(10000);
  const __m256i low_dwords = _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0);
  const __m256i sixty_four = _mm256_set1_epi64x(64), one = _mm256_set1_epi64x(1), low_byte = _mm256_set1_epi64x(0xff);
  const __m256i zero_digit = _mm256_set1_epi64x('0');
  const __m128i eight = _mm_set1_epi32(8), one32 = _mm_set1_epi32(1);
  if (loadable < text) return 0;  // no eight-byte load fits: the scalar loop reads them all
  const auto last_load = static_cast<std::uint32_t>(loadable - text);  // the greatest begin a load may start at
  __m256i zero_led = _mm256_setzero_si256();
  __m128i before = _mm_set1_epi32(-1);  // the end before the first id: its begin is 0
  std::size_t i = 0;
  for (; i + 4 <= ends.size(); i += 4) {
    if (ends[i + 2] + 1 > last_load) break;  // the fourth id's load would overrun
    const __m128i end = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ends.data() + i));
    const __m128i begin = _mm_add_epi32(_mm_alignr_epi8(end, before, 12), one32);
    const __m128i length = _mm_sub_epi32(end, begin);
    if (_mm_movemask_epi8(_mm_cmpgt_epi32(length, eight)) != 0) break;
    before = end;
    const __m256i words = _mm256_i32gather_epi64(reinterpret_cast<const long long*>(text), begin, 1);
    const __m256i length64 = _mm256_cvtepu32_epi64(length);
    zero_led = _mm256_or_si256(zero_led, _mm256_and_si256(_mm256_cmpeq_epi64(_mm256_and_si256(words, low_byte), zero_digit),
                                                          _mm256_cmpgt_epi64(length64, one)));
    const __m256i shifts = _mm256_sub_epi64(sixty_four, _mm256_slli_epi64(length64, 3));
    const __m256i digits = _mm256_sllv_epi64(_mm256_xor_si256(words, zeros), shifts);
    const __m256i fours = _mm256_madd_epi16(_mm256_maddubs_epi16(digits, tens), hundreds);
    const __m256i values = _mm256_add_epi64(_mm256_mul_epu32(fours, ten_thousand), _mm256_srli_epi64(fours, 32));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(ids + i), _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(values, low_dwords)));
  }
  leading_zero |= static_cast<std::uint64_t>(!_mm256_testz_si256(zero_led, zero_led));
  return i;
}

/// `classify`, 32 bytes a step.
__attribute__((target("avx2"))) byte_classes classify_avx2(const char* p, std::size_t size) {
  byte_classes classes;
  const __m256i comma = _mm256_set1_epi8(','), zero = _mm256_set1_epi8('0'), nine = _mm256_set1_epi8('9');
  std::size_t i = 0;
  for (; i + 32 <= size; i += 32) {
    const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
    const __m256i digit =
        _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_max_epu8(bytes, zero), bytes), _mm256_cmpeq_epi8(_mm256_min_epu8(bytes, nine), bytes));
    const auto commas = static_cast<std::uint64_t>(static_cast<std::uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(bytes, comma))));
    const auto digits = static_cast<std::uint64_t>(static_cast<std::uint32_t>(_mm256_movemask_epi8(digit)));
    classes.commas |= commas << i;
    classes.others |= (~(commas | digits) & 0xffffffffull) << i;
  }
  const byte_classes tail = classify(p + i, size - i);
  classes.commas |= i < 64 ? tail.commas << i : 0;
  classes.others |= i < 64 ? tail.others << i : 0;
  return classes;
}

#endif

/// Whether the AVX2 loops above may run (checked once).
bool cpu_has_avx2() {
#if defined(KVR_TOKEN_IDS_AVX2)
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
#else
  return false;
#endif
}

/// `classify` on the widest vectors the CPU has.
byte_classes classify_block(const char* p, std::size_t size, bool avx2) {
#if defined(KVR_TOKEN_IDS_AVX2)
  if (avx2) return classify_avx2(p, size);
#endif
  (void)avx2;
  return classify(p, size);
}

/// The common form without whitespace (`[1,22,333]`, what JSON.stringify and most clients
/// write), read in two passes: the commas of 64 bytes at a time become a bitmask (any other byte
/// declines) and their positions a list; then each id, between two of them, is converted on its
/// own, in a loop whose every round does the same work, so that rounds overlap rather than wait
/// on the last id's digits. Each id is one unaligned load shifted so that its digits end at the
/// top (the bytes after it fall out, zeros lead): `value` must be readable `padding` bytes past
/// its end, or the last ids go one at a time.
bool read_compact(std::string_view value, std::size_t padding, std::vector<std::uint32_t>& out) {
  const std::string_view inside = value.substr(1, value.size() - 2);  // between the brackets
  if (inside.empty() || !is_digit(inside.front()) || !is_digit(inside.back())) return false;
  // Where each id ends: its comma, or the bracket. No two commas touch and digits come first
  // and last, so there are at most size / 2 commas; written without a capacity check each.
  thread_local std::vector<std::uint32_t> end_buffer;
  if (end_buffer.size() < inside.size() / 2 + 1) end_buffer.resize(inside.size() / 2 + 1);
  std::uint32_t* const end_at = end_buffer.data();
  std::size_t count = 0;
  const bool avx2 = cpu_has_avx2();
  std::uint64_t previous_top = 0;  // the last byte of the previous 64 was a comma
  for (std::size_t at = 0; at < inside.size(); at += 64) {
    const auto classes = classify_block(inside.data() + at, std::min<std::size_t>(64, inside.size() - at), avx2);
    if (classes.others != 0 || (classes.commas & ((classes.commas << 1) | previous_top)) != 0) return false;
    previous_top = classes.commas >> 63;
    for (std::uint64_t mask = classes.commas; mask != 0; mask &= mask - 1)
      end_at[count++] = static_cast<std::uint32_t>(at + static_cast<std::size_t>(std::countr_zero(mask)));
  }
  end_at[count++] = static_cast<std::uint32_t>(inside.size());
  const std::span<const std::uint32_t> ends(end_at, count);
  const std::size_t first = out.size();
  out.resize(first + ends.size());
  std::uint32_t* const ids = out.data() + first;
  const char* const text = inside.data();
  const char* const loadable = value.data() + value.size() + padding - 8;  // the last 8-byte load's start
  std::uint64_t leading_zero = 0;  // an id of two digits or more began with 0
  std::size_t i = 0;
#if defined(KVR_TOKEN_IDS_AVX2)
  if (avx2) i = convert_in_fours(text, ends, loadable, ids, leading_zero);
#endif
  std::size_t begin = i == 0 ? 0 : ends[i - 1] + 1;
  for (; i < ends.size(); ++i) {
    const std::size_t length = ends[i] - begin;
    if (length > 8 || text + begin > loadable) [[unlikely]] {
      if (!long_id(text + begin, length, ids[i])) return false;
      leading_zero |= static_cast<std::uint64_t>(length > 1 && text[begin] == '0');
    } else {
      std::uint64_t word = 0;
      std::memcpy(&word, text + begin, 8);
      leading_zero |= static_cast<std::uint64_t>(length > 1 && (word & 0xff) == '0');
      ids[i] = digits_value((word ^ repeated('0')) << (64 - 8 * length));
    }
    begin = ends[i] + 1;
  }
  return leading_zero == 0;
}

}  // namespace

bool read_token_id_array(std::string_view value, std::vector<std::uint32_t>& out, std::size_t padding) {
  if (value.size() < 3 || value.front() != '[' || value.back() != ']') return false;
  const std::size_t first = out.size();
  if (read_compact(value, padding, out)) return true;
  out.resize(first);  // whitespace, or something to decline: one id at a time
  const char* p = value.data();
  const char* const end = p + value.size();
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
