// The token-id reader (16 ids a step where the CPU has AVX-512 VBMI) against the one-at-a-time
// reference: same ids, same end position, same refusals, on arrays of every width mix, with
// malformed elements anywhere, and cut short at every length.
#include "core/kv/msgpack_token_ids.hpp"

#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace kvr {
namespace {

/// Appends `id` in the format `width` (1 fixint, 2 uint8, 3 uint16, 5 uint32); the value is
/// reduced to fit.
void append_id(std::vector<std::uint8_t>& out, std::uint32_t id, int width) {
  switch (width) {
    case 1: out.push_back(static_cast<std::uint8_t>(id & 0x7f)); break;
    case 2: out.insert(out.end(), {0xcc, static_cast<std::uint8_t>(id)}); break;
    case 3: out.insert(out.end(), {0xcd, static_cast<std::uint8_t>(id >> 8), static_cast<std::uint8_t>(id)}); break;
    default:
      out.insert(out.end(), {0xce, static_cast<std::uint8_t>(id >> 24), static_cast<std::uint8_t>(id >> 16),
                             static_cast<std::uint8_t>(id >> 8), static_cast<std::uint8_t>(id)});
  }
}

struct outcome {
  const std::uint8_t* end;
  std::vector<std::uint32_t> ids;
};

outcome read_with(decltype(&read_msgpack_token_ids) reader, const std::vector<std::uint8_t>& bytes, std::size_t count) {
  outcome result{nullptr, std::vector<std::uint32_t>(count)};
  result.end = reader(bytes.data(), bytes.data() + bytes.size(), result.ids);
  if (result.end == nullptr) result.ids.clear();  // unspecified on refusal
  return result;
}

void expect_same_as_reference(const std::vector<std::uint8_t>& bytes, std::size_t count, const std::string& what) {
  const outcome fast = read_with(&read_msgpack_token_ids, bytes, count);
  const outcome reference = read_with(&read_msgpack_token_ids_one_by_one, bytes, count);
  ASSERT_EQ(fast.end, reference.end) << what;
  ASSERT_EQ(fast.ids, reference.ids) << what;
}

/// An array body of `count` ids whose widths come from `widths`, then `tail` bytes of other
/// fields (which must never be read as ids).
std::vector<std::uint8_t> array_body(std::mt19937_64& rng, std::size_t count, const std::vector<int>& widths,
                                     const std::vector<std::uint8_t>& tail) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i < count; ++i)
    append_id(out, static_cast<std::uint32_t>(rng()), widths[rng() % widths.size()]);
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

TEST(msgpack_token_ids, ids_of_every_width_read_back_exactly) {
  std::vector<std::uint8_t> bytes;
  const std::vector<std::uint32_t> ids = {0, 127, 200, 255, 256, 65535, 65536, 151000, 0xffffffffu};
  const std::vector<int> widths = {1, 1, 2, 2, 3, 3, 5, 5, 5};
  for (int repeat = 0; repeat < 20; ++repeat)
    for (std::size_t i = 0; i < ids.size(); ++i) append_id(bytes, ids[i], widths[i]);
  std::vector<std::uint32_t> out(ids.size() * 20);
  ASSERT_EQ(read_msgpack_token_ids(bytes.data(), bytes.data() + bytes.size(), out), bytes.data() + bytes.size());
  for (std::size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], ids[i % ids.size()]) << i;
}

TEST(msgpack_token_ids, random_arrays_of_every_width_mix_read_as_the_reference_reads_them) {
  std::mt19937_64 rng(7);
  const std::vector<std::vector<int>> mixes = {{1}, {2}, {3}, {5}, {3, 5}, {1, 2, 3, 5}, {1, 3}, {2, 5}};
  const std::vector<std::uint8_t> tail = {0x10, 0xc0, 0xa3, 'g', 'p', 'u', 0xc0, 0xc1, 0xff};
  for (int round = 0; round < 400; ++round) {
    const std::size_t count = rng() % 300;
    const auto& mix = mixes[rng() % mixes.size()];
    expect_same_as_reference(array_body(rng, count, mix, rng() % 2 ? tail : std::vector<std::uint8_t>{}), count,
                             "round " + std::to_string(round));
  }
}

TEST(msgpack_token_ids, an_element_of_another_format_is_refused_wherever_it_is) {
  std::mt19937_64 rng(11);
  // Formats an id may not take: uint64, signed ints, nil, bool, a string, a float, reserved.
  const std::vector<std::uint8_t> foreign = {0xcf, 0xd0, 0xd1, 0xd2, 0xd3, 0xc0, 0xc2, 0xa1, 0xcb, 0xc1, 0xe0, 0x90};
  for (int round = 0; round < 400; ++round) {
    const std::size_t count = 1 + rng() % 120;
    std::vector<std::uint8_t> bytes;
    const std::size_t bad_at = rng() % count;
    for (std::size_t i = 0; i < count; ++i) {
      if (i == bad_at) {
        bytes.push_back(foreign[rng() % foreign.size()]);
        bytes.insert(bytes.end(), 8, 0x01);  // whatever its payload would be
      } else {
        append_id(bytes, static_cast<std::uint32_t>(rng()), rng() % 2 ? 3 : 5);
      }
    }
    std::vector<std::uint32_t> out(count);
    EXPECT_EQ(read_msgpack_token_ids(bytes.data(), bytes.data() + bytes.size(), out), nullptr) << "round " << round;
    expect_same_as_reference(bytes, count, "round " + std::to_string(round));
  }
}

TEST(msgpack_token_ids, bytes_after_the_last_id_are_never_read_as_ids) {
  // 40 ids of 3 bytes, then bytes that begin no id: the reader must stop at the 40th.
  std::mt19937_64 rng(3);
  std::vector<std::uint8_t> bytes = array_body(rng, 40, {3}, std::vector<std::uint8_t>(64, 0xc1));
  std::vector<std::uint32_t> out(40);
  EXPECT_EQ(read_msgpack_token_ids(bytes.data(), bytes.data() + bytes.size(), out), bytes.data() + 120);
}

TEST(msgpack_token_ids, an_array_cut_short_at_any_byte_is_refused_without_reading_past_its_end) {
  std::mt19937_64 rng(5);
  const std::vector<std::uint8_t> whole = array_body(rng, 60, {1, 2, 3, 5}, {});
  for (std::size_t cut = 0; cut < whole.size(); ++cut) {
    // A copy of exactly `cut` bytes, so that AddressSanitizer sees any read past them.
    const std::vector<std::uint8_t> bytes(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(cut));
    std::vector<std::uint32_t> out(60);
    EXPECT_EQ(read_msgpack_token_ids(bytes.data(), bytes.data() + bytes.size(), out), nullptr) << cut;
  }
}

}  // namespace
}  // namespace kvr
