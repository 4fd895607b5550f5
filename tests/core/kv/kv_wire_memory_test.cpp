// What decoding a hostile KV-event payload can make the router allocate. Its own binary: it
// links the counting allocator (tests/support), which other tests need not see.

#include <cstdio>
#include <vector>

#include <gtest/gtest.h>

#include "core/kv/kv_wire.hpp"
#include "tests/support/counting_allocator.hpp"

namespace kvr {
namespace {

using testing::live_bytes;
using testing::peak_bytes;

/// The most a payload's decoding may allocate at once, as a multiple of the payload's size.
constexpr std::size_t max_amplification = 24;

void append_u32(std::vector<std::uint8_t>& out, std::uint32_t n) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(n >> shift));
}
void append_array32(std::vector<std::uint8_t>& out, std::uint32_t n) {
  out.push_back(0xdd);
  append_u32(out, n);
}
void append_str(std::vector<std::uint8_t>& out, std::string_view s) {
  out.push_back(static_cast<std::uint8_t>(0xa0 | s.size()));
  out.insert(out.end(), s.begin(), s.end());
}

/// `[0, events]` with `events` filling the payload up to about `budget` bytes.
template <class Fill>
std::vector<std::uint8_t> batch_of(std::uint32_t count, Fill fill) {
  std::vector<std::uint8_t> out{0x92, 0x00};
  append_array32(out, count);
  for (std::uint32_t i = 0; i < count; ++i) fill(out, i);
  return out;
}

struct hostile_payload {
  const char* name;
  std::vector<std::uint8_t> bytes;
};

std::vector<hostile_payload> hostile_payloads() {
  constexpr std::size_t budget = kv_wire_decoder::max_payload_bytes - 64;
  std::vector<hostile_payload> out;
  // Not a batch at all: an array of one-byte values.
  {
    std::vector<std::uint8_t> bytes;
    append_array32(bytes, budget - 5);
    bytes.resize(budget, 0x01);
    out.push_back({"an array of one-byte values", std::move(bytes)});
  }
  // A batch whose events are one-byte values (each malformed, each counted).
  out.push_back({"one-byte events", batch_of(budget - 8, [](auto& b, std::uint32_t) { b.push_back(0x01); })});
  // The smallest events the decoder keeps.
  out.push_back({"the smallest removals", batch_of((budget - 8) / 15, [](auto& b, std::uint32_t) {
                   b.push_back(0x92);
                   append_str(b, "BlockRemoved");
                   b.push_back(0x90);
                 })});
  out.push_back({"cache resets", batch_of((budget - 8) / 18, [](auto& b, std::uint32_t) {
                   b.push_back(0x91);
                   append_str(b, "AllBlocksCleared");
                 })});
  // One removal of a million one-byte hashes.
  {
    std::vector<std::uint8_t> bytes{0x92, 0x00, 0x91, 0x92};
    append_str(bytes, "BlockRemoved");
    append_array32(bytes, static_cast<std::uint32_t>(budget - bytes.size() - 5));
    bytes.resize(budget, 0x07);
    out.push_back({"one removal of one-byte hashes", std::move(bytes)});
  }
  // One store of one-byte tokens whose extra_keys name an image per token.
  {
    const std::uint32_t tokens = static_cast<std::uint32_t>(budget / 4);
    std::vector<std::uint8_t> bytes{0x92, 0x00, 0x91, 0x99};  // [ts, [[9 fields]]]
    append_str(bytes, "BlockStored");
    bytes.insert(bytes.end(), {0x91, 0x07, 0xc0});  // block_hashes [7], parent nil
    append_array32(bytes, tokens);
    bytes.resize(bytes.size() + tokens, 0x01);
    bytes.push_back(0xce);  // block_size = tokens
    append_u32(bytes, tokens);
    bytes.insert(bytes.end(), {0xc0, 0xc0, 0xc0, 0x91});  // lora_id, medium, lora_name; extra_keys [[...]]
    append_array32(bytes, tokens);
    for (std::uint32_t i = 0; i < tokens && bytes.size() + 2 < budget; ++i) append_str(bytes, "i");
    out.push_back({"an image per token", std::move(bytes)});
  }
  return out;
}

TEST(kv_wire_memory, decoding_allocates_at_most_a_small_multiple_of_the_payload_and_keeps_nothing) {
  kv_wire_decoder decoder;
  for (auto& [name, bytes] : hostile_payloads()) {
    ASSERT_LE(bytes.size(), kv_wire_decoder::max_payload_bytes) << name;
    const std::size_t before = live_bytes.load();
    peak_bytes.store(before);
    {
      kv_batch batch;
      (void)decoder.decode_batch(bytes, batch);
      (void)decoder.decode_event(bytes);
    }
    const std::size_t peak = peak_bytes.load() - before;
    const std::size_t after = live_bytes.load();
    std::printf("%-34s payload %7zu B, peak %9zu B (%.1fx)\n", name, bytes.size(), peak,
                static_cast<double>(peak) / static_cast<double>(bytes.size()));
    EXPECT_LE(peak, max_amplification * bytes.size()) << name;
    EXPECT_EQ(after, before) << name << ": the decoder keeps nothing once the batch is gone";
  }
}

}  // namespace
}  // namespace kvr
