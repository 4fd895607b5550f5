#include "core/kv/msgpack_token_ids.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>

#include "core/kv/msgpack_view.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kvr {

const std::uint8_t* read_msgpack_token_ids_one_by_one(const std::uint8_t* p, const std::uint8_t* end,
                                                      std::span<std::uint32_t> out) {
  for (std::uint32_t& token : out) {
    const std::size_t available = static_cast<std::size_t>(end - p);
    if (available == 0) return nullptr;
    const std::uint8_t marker = *p;
    if (marker <= 0x7f) {
      token = marker;
      p += 1;
    } else if (marker == 0xcd && available >= 3) {
      token = load_big_endian<std::uint16_t>(p + 1);
      p += 3;
    } else if (marker == 0xce && available >= 5) {
      token = load_big_endian<std::uint32_t>(p + 1);
      p += 5;
    } else if (marker == 0xcc && available >= 2) {
      token = p[1];
      p += 2;
    } else {
      return nullptr;
    }
  }
  return p;
}

#if defined(__x86_64__)
namespace {

constexpr std::size_t window = 64;  ///< bytes per step
constexpr std::size_t per_step = 16;  ///< ids per step: one 32-bit lane each
/// Fewer ids than this are left to the one-at-a-time reader: a window's dependent shuffles
/// take longer than a few ids' branches, mispredicted or not. (Most often this is the tail of
/// a 16-token block, which 64 bytes hold all but one or two ids of.)
constexpr std::size_t min_ids_per_window = 4;

bool cpu_has_vbmi() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vbmi");
  return has;
}

template <class Fn>
consteval std::array<std::uint8_t, window> bytes_of(Fn fn) {
  std::array<std::uint8_t, window> out{};
  for (std::size_t i = 0; i < window; ++i) out[i] = static_cast<std::uint8_t>(fn(i));
  return out;
}
alignas(64) constexpr auto byte_index = bytes_of([](std::size_t i) { return i; });
alignas(64) constexpr auto lane_of_byte = bytes_of([](std::size_t i) { return i / 4; });  ///< output lane k: bytes 4k..4k+3
alignas(64) constexpr auto byte_in_lane = bytes_of([](std::size_t i) { return i % 4; });   ///< 0 = least significant

/// table[index[i]] in every lane (the zero-masking form: gcc 12's unmasked one warns).
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) inline __m512i shuffle(__m512i table, __m512i index) {
  return _mm512_maskz_permutexvar_epi8(~__mmask64{0}, index, table);
}

/// Positions past the window (64 to 68) all lead to `outside`, which leads to itself: the
/// second table of a two-table shuffle, so a jump needs no check of where it starts.
constexpr char outside = 127;

/// Every lane moves from its position to `next[position]`.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) inline __m512i jump(__m512i next, __m512i from) {
  return _mm512_permutex2var_epi8(next, from, _mm512_set1_epi8(outside));
}

/// Lanes in `lanes` move from their position to `next[position]`; the others stay.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) inline __m512i jump(__mmask64 lanes, __m512i next,
                                                                            __m512i from) {
  return _mm512_mask2_permutex2var_epi8(next, from, lanes, _mm512_set1_epi8(outside));
}

/// Reads ids while 64 bytes and `min_ids_per_window` ids remain and the next id is one; returns
/// how many it read (into out[0..]) and moves `p` past them.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) std::size_t read_in_windows(const std::uint8_t*& p,
                                                                                  const std::uint8_t* end,
                                                                                  std::span<std::uint32_t> out) {
  const __m512i index = _mm512_load_si512(byte_index.data());
  const __m512i lane_byte_lane = _mm512_load_si512(lane_of_byte.data());
  const __m512i lane_byte = _mm512_load_si512(byte_in_lane.data());
  const __m512i one = _mm512_set1_epi8(1), zero = _mm512_setzero_si512();
  const __m512i window_size = _mm512_set1_epi8(static_cast<char>(window));
  constexpr __mmask64 step_lanes = (__mmask64{1} << per_step) - 1;
  std::size_t done = 0;
  while (out.size() - done >= min_ids_per_window && static_cast<std::size_t>(end - p) >= window) {
    const __m512i bytes = _mm512_loadu_si512(p);
    // The length of an id that would start at each byte: 1, 2, 3 or 5, or 0 where none can.
    __m512i length = _mm512_maskz_mov_epi8(_mm512_cmplt_epu8_mask(bytes, _mm512_set1_epi8(static_cast<char>(0x80))), one);
    length = _mm512_mask_mov_epi8(length, _mm512_cmpeq_epi8_mask(bytes, _mm512_set1_epi8(static_cast<char>(0xcc))),
                                  _mm512_set1_epi8(2));
    length = _mm512_mask_mov_epi8(length, _mm512_cmpeq_epi8_mask(bytes, _mm512_set1_epi8(static_cast<char>(0xcd))),
                                  _mm512_set1_epi8(3));
    length = _mm512_mask_mov_epi8(length, _mm512_cmpeq_epi8_mask(bytes, _mm512_set1_epi8(static_cast<char>(0xce))),
                                  _mm512_set1_epi8(5));
    // next1[i]: where the id after one starting at i starts; next2, next4, next8 jump further.
    const __m512i next1 = _mm512_add_epi8(index, length);
    const __m512i next2 = jump(next1, next1);
    const __m512i next4 = jump(next2, next2);
    const __m512i next8 = jump(next4, next4);
    // start[k]: where id k starts, reached from 0 by the jumps of k's binary digits.
    __m512i start = zero;
    start = jump(0xAAAA, next1, start);
    start = jump(0xCCCC, next2, start);
    start = jump(0xF0F0, next4, start);
    start = jump(0xFF00, next8, start);
    const __m512i id_length = shuffle(length, start);
    const __m512i id_end = _mm512_add_epi8(start, id_length);
    const __mmask64 starts_inside = _mm512_cmplt_epu8_mask(start, window_size) & step_lanes;
    const __mmask64 whole = starts_inside & _mm512_test_epi8_mask(id_length, id_length) &
                            _mm512_cmple_epu8_mask(id_end, window_size);
    const auto complete = static_cast<std::size_t>(std::countr_one(static_cast<std::uint64_t>(whole)));
    const std::size_t take = std::min(complete, out.size() - done);
    // A byte that begins no id ends the run of whole ids before it; once it comes first, the
    // one-at-a-time loop gives the verdict. (Past the array's last id, the window holds the
    // fields after it: `take` never reaches them.)
    if (take == 0) break;
    // Byte j of lane k is byte j (from the least significant) of id k: at start + length - 1 - j.
    // A fixint is its own value; the other widths hold length - 1 value bytes.
    const __m512i lane_start = shuffle(start, lane_byte_lane);
    const __m512i lane_length = shuffle(id_length, lane_byte_lane);
    const __m512i source = _mm512_sub_epi8(_mm512_add_epi8(lane_start, lane_length), _mm512_add_epi8(lane_byte, one));
    const __m512i value_bytes = _mm512_max_epu8(_mm512_sub_epi8(lane_length, one), one);
    const __m512i values = _mm512_maskz_mov_epi8(_mm512_cmplt_epu8_mask(lane_byte, value_bytes),
                                                 shuffle(bytes, source));
    _mm512_mask_storeu_epi32(out.data() + done, static_cast<__mmask16>((1u << take) - 1), values);
    // Past id take - 1 (a byte shuffle within the low 16 lanes: a store and a byte load would
    // wait for store forwarding on the loop's critical path).
    const __m128i last_end = _mm_shuffle_epi8(_mm512_maskz_extracti32x4_epi32(0xf, id_end, 0), _mm_set1_epi8(static_cast<char>(take - 1)));
    p += _mm_cvtsi128_si32(last_end) & 0xff;
    done += take;
  }
  return done;
}

}  // namespace
#endif

const std::uint8_t* read_msgpack_token_ids(const std::uint8_t* p, const std::uint8_t* end, std::span<std::uint32_t> out) {
  std::size_t done = 0;
#if defined(__x86_64__)
  if (cpu_has_vbmi()) done = read_in_windows(p, end, out);
#endif
  return read_msgpack_token_ids_one_by_one(p, end, out.subspan(done));
}

}  // namespace kvr
