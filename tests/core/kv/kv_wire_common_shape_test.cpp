#include "core/kv/kv_wire_common_shape.hpp"

#include <fstream>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "core/kv/kv_encode.hpp"
#include "core/kv/kv_wire.hpp"

namespace kvr {
namespace {

std::vector<std::uint8_t> from_hex(std::string_view hex) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<std::uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return out;
}

/// Every payload of the shared and extra vector files, by name.
std::map<std::string, std::vector<std::uint8_t>> all_vectors() {
  std::map<std::string, std::vector<std::uint8_t>> out;
  for (const char* file : {"vectors.tsv", "extra_vectors.tsv"}) {
    std::ifstream in(std::string(KVR_TEST_DATA_DIR) + "/kv_events/" + file);
    std::string line;
    while (std::getline(in, line))
      if (!line.empty() && line[0] != '#') out[line.substr(0, line.find('\t'))] = from_hex(line.substr(line.rfind('\t') + 1));
  }
  return out;
}

/// The general decoder's reading of `payload`, or nullopt where it refuses it.
std::optional<kv_batch> general(std::span<const std::uint8_t> payload) {
  kv_wire_decoder decoder;
  kv_batch batch;
  if (!decoder.decode_batch_any_shape(payload, batch)) return std::nullopt;
  return batch;
}

std::optional<kv_batch> common(std::span<const std::uint8_t> payload) {
  kv_batch batch;
  if (!decode_common_batch(payload, batch)) return std::nullopt;
  return batch;
}

kv_stored stored_of(std::size_t blocks, std::uint64_t first_hash, std::optional<std::uint64_t> parent) {
  kv_stored stored{.block_hashes = {}, .parent_block_hash = parent, .token_ids = {}, .block_size = 4};
  for (std::size_t b = 0; b < blocks; ++b) {
    stored.block_hashes.push_back(first_hash + b);
    for (std::uint32_t t = 0; t < 4; ++t) stored.token_ids.push_back(static_cast<std::uint32_t>(b * 40000 + t * 300));
  }
  return stored;
}

std::vector<std::uint8_t> encoded(const std::vector<kv_event>& events, kv_encode_options options = {}) {
  return encode_kv_batch(kv_batch{.timestamp = 2.25, .dp_rank = 1, .events = events}, options);
}

TEST(kv_wire_common_shape, reads_what_vllm_and_sglang_array_forms_publish_as_the_general_decoder_does) {
  const kv_stored stored = stored_of(3, 0xfedcba9876543210ull, 77);
  for (const kv_event_format format : {kv_event_format::vllm_array, kv_event_format::sglang}) {
    const auto payload = encoded({stored, kv_removed{.block_hashes = {5, 6}}, kv_cleared{}}, {.format = format});
    const auto fast = common(payload);
    ASSERT_TRUE(fast) << to_string(format);
    EXPECT_EQ(*fast, *general(payload)) << to_string(format);
    ASSERT_EQ(fast->events.size(), 3u);
    EXPECT_EQ(std::get<kv_stored>(fast->events[0]).block_hashes, stored.block_hashes);
    EXPECT_EQ(std::get<kv_stored>(fast->events[0]).token_ids, stored.token_ids);
    EXPECT_EQ(fast->dp_rank, 1);
  }
}

TEST(kv_wire_common_shape, keeps_negative_hashes_as_their_bit_pattern) {
  const auto payload = encoded({stored_of(2, static_cast<std::uint64_t>(-5), static_cast<std::uint64_t>(-9))},
                               {.format = kv_event_format::sglang});
  const auto fast = common(payload);
  ASSERT_TRUE(fast);
  EXPECT_EQ(*fast, *general(payload));
  EXPECT_EQ(std::get<kv_stored>(fast->events[0]).parent_block_hash, static_cast<std::uint64_t>(-9));
}

TEST(kv_wire_common_shape, agrees_with_the_general_decoder_on_every_vector_it_accepts) {
  std::size_t accepted = 0;
  for (const auto& [name, payload] : all_vectors()) {
    const auto fast = common(payload);
    if (!fast) continue;
    ++accepted;
    const auto slow = general(payload);
    ASSERT_TRUE(slow) << name;
    EXPECT_EQ(*fast, *slow) << name;
  }
  // The array forms: vLLM's 12-, 11- and 7-element stores, its 2-element envelope, SGLang's.
  EXPECT_GE(accepted, 5u);
}

TEST(kv_wire_common_shape, declines_the_shapes_it_leaves_to_the_general_decoder) {
  const kv_stored plain = stored_of(2, 100, std::nullopt);
  kv_stored with_image = plain;
  with_image.images.push_back({.block = 1, .hash = 0, .offset = 0, .identifier = "img"});
  const std::map<std::string, std::vector<std::uint8_t>> declined{
      {"map form", encoded({plain}, {.format = kv_event_format::vllm_map})},
      {"bin hashes", encoded({plain}, {.bin_hashes = true})},
      {"an image in extra_keys", encoded({with_image})},
  };
  for (const auto& [name, payload] : declined) {
    EXPECT_FALSE(common(payload)) << name;
    EXPECT_TRUE(general(payload)) << name;
  }
  for (const char* name : {"sglang_8_element_store_with_metadata_map", "sglang_eagle_token_pairs",
                           "mixed_batch_with_unknown_tag", "map_envelope", "trailing_elements",
                           "malformed_event_in_good_batch", "vllm_map_lora_images_salt"})
    EXPECT_FALSE(common(all_vectors().at(name))) << name;
}

TEST(kv_wire_common_shape, declines_every_truncation_and_any_trailing_byte) {
  const auto payload = encoded({stored_of(2, 100, 99), kv_removed{.block_hashes = {100}}});
  ASSERT_TRUE(common(payload));
  for (std::size_t cut = 0; cut < payload.size(); ++cut)
    EXPECT_FALSE(common(std::span(payload).first(cut))) << "cut at " << cut;
  auto trailing = payload;
  trailing.push_back(0xc0);
  EXPECT_FALSE(common(trailing));
}

TEST(kv_wire_common_shape, declines_declared_lengths_the_bytes_cannot_hold) {
  // [1.5, [["BlockStored", <array of 2^32-1 hashes>, ...]]]: the count is refused before room
  // is made for it.
  const std::vector<std::uint8_t> huge{0x92, 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0x91, 0x95, 0xab, 'B', 'l', 'o',
                                       'c', 'k', 'S', 't', 'o', 'r', 'e', 'd', 0xdd, 0xff, 0xff, 0xff, 0xff};
  kv_batch batch;
  EXPECT_FALSE(decode_common_batch(huge, batch));
  EXPECT_LE(batch.events.capacity(), huge.size());
}

TEST(kv_wire_common_shape, a_reused_batch_holds_only_the_last_payload) {
  kv_batch batch;
  ASSERT_TRUE(decode_common_batch(encoded({stored_of(3, 1, std::nullopt), kv_cleared{}}), batch));
  const auto second = encode_kv_batch(kv_batch{.timestamp = 0, .dp_rank = std::nullopt, .events = {kv_removed{.block_hashes = {7}}}});
  ASSERT_TRUE(decode_common_batch(second, batch));
  EXPECT_EQ(batch, *general(second));
}

/// Random batches in every encoding the mocker speaks, and random byte flips of them: wherever
/// the common reader accepts, it reads what the general decoder reads; `decode_batch`, which
/// tries it first, answers as the general decoder does on all of them.
TEST(kv_wire_common_shape, matches_the_general_decoder_on_random_batches_and_their_corruptions) {
  std::mt19937_64 rng(20261203);
  kv_wire_decoder decoder;
  std::size_t accepted = 0;
  for (int round = 0; round < 400; ++round) {
    std::vector<kv_event> events;
    for (std::uint64_t e = rng() % 4; e > 0; --e) {
      switch (rng() % 3) {
        case 0: events.emplace_back(stored_of(rng() % 5, rng() >> (rng() % 64), rng() % 2 ? std::optional(rng()) : std::nullopt)); break;
        case 1: events.emplace_back(kv_removed{.block_hashes = {rng(), rng() % 300}}); break;
        default: events.emplace_back(kv_cleared{}); break;
      }
    }
    const kv_encode_options options{.format = static_cast<kv_event_format>(rng() % 3), .bin_hashes = rng() % 5 == 0};
    auto payload = encoded(events, options);
    if (round % 2 == 1) payload[rng() % payload.size()] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
    const auto slow = general(payload);
    if (const auto fast = common(payload)) {
      ++accepted;
      ASSERT_TRUE(slow) << "round " << round;
      EXPECT_EQ(*fast, *slow) << "round " << round;
    }
    kv_batch through_front;
    const bool front_ok = decoder.decode_batch(payload, through_front).has_value();
    ASSERT_EQ(front_ok, slow.has_value()) << "round " << round;
    if (slow) {
      EXPECT_EQ(through_front, *slow) << "round " << round;
    }
  }
  EXPECT_GT(accepted, 100u);
}

}  // namespace
}  // namespace kvr
