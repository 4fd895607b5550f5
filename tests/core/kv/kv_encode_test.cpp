#include "core/kv/kv_encode.hpp"

#include <algorithm>

#include <gtest/gtest.h>

#include "core/kv/kv_wire.hpp"

namespace kvr {
namespace {

kv_batch sample_batch() {
  kv_stored stored;
  stored.block_hashes = {0xfedcba9876543210ull, 42};
  stored.parent_block_hash = 7;
  stored.token_ids = {1, 2, 3, 4, 5, 6, 7, 8};
  stored.block_size = 4;
  return kv_batch{.timestamp = 12.5, .dp_rank = 1, .events = {stored, kv_removed{{0xfedcba9876543210ull}}, kv_cleared{}}};
}

class kv_encode_round_trip : public ::testing::TestWithParam<std::pair<kv_event_format, bool>> {};

TEST_P(kv_encode_round_trip, what_the_mocker_publishes_decodes_to_the_same_events) {
  const auto [format, bin] = GetParam();
  const std::vector<std::uint8_t> payload = encode_kv_batch(sample_batch(), {format, bin});
  kv_wire_decoder decoder;
  kv_batch decoded;
  ASSERT_TRUE(decoder.decode_batch(payload, decoded).has_value());
  EXPECT_EQ(decoded.malformed_events, 0u) << decoded.first_error;
  EXPECT_EQ(decoded.timestamp, 12.5);
  EXPECT_EQ(decoded.dp_rank, 1);
  ASSERT_EQ(decoded.events.size(), 3u);
  const auto& stored = std::get<kv_stored>(decoded.events[0]);
  EXPECT_EQ(stored.block_hashes, (std::vector<std::uint64_t>{0xfedcba9876543210ull, 42}));
  EXPECT_EQ(stored.parent_block_hash, 7u);
  EXPECT_EQ(stored.token_ids, (std::vector<std::uint32_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(stored.block_size, 4u);
  EXPECT_TRUE(is_gpu_tier(stored.medium));
  EXPECT_EQ(std::get<kv_removed>(decoded.events[1]).block_hashes, (std::vector<std::uint64_t>{0xfedcba9876543210ull}));
  EXPECT_TRUE(std::holds_alternative<kv_cleared>(decoded.events[2]));
}

INSTANTIATE_TEST_SUITE_P(every_format, kv_encode_round_trip,
                         ::testing::Values(std::pair{kv_event_format::vllm_array, false},
                                           std::pair{kv_event_format::vllm_map, false},
                                           std::pair{kv_event_format::sglang, false},
                                           std::pair{kv_event_format::vllm_array, true},
                                           std::pair{kv_event_format::vllm_map, true}),
                         [](const auto& info) {
                           std::string name(to_string(info.param.first));
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name + (info.param.second ? "_bin_hashes" : "_int_hashes");
                         });

TEST(kv_encode, images_go_out_in_extra_keys_as_vllm_sends_them) {
  kv_stored stored;
  stored.block_hashes = {1, 2};
  stored.token_ids = std::vector<std::uint32_t>(8, 7);
  stored.block_size = 4;
  const std::string digest = "00000000000000ab" + std::string(48, '0');
  stored.images = {{.block = 0, .hash = 0xab, .offset = 2, .identifier = digest},
                   {.block = 1, .hash = 0xab, .offset = -2, .identifier = digest}};
  for (kv_event_format format : {kv_event_format::vllm_array, kv_event_format::vllm_map}) {
    kv_wire_decoder decoder;
    kv_batch decoded;
    ASSERT_TRUE(decoder.decode_batch(encode_kv_batch(kv_batch{.events = {stored}}, {format}), decoded).has_value());
    const auto& images = std::get<kv_stored>(decoded.events.at(0)).images;
    ASSERT_EQ(images.size(), 2u) << to_string(format);
    EXPECT_EQ(images[0].hash, 0xabu);
    EXPECT_EQ(images[0].offset, 2);
    EXPECT_EQ(images[1].block, 1u);
    EXPECT_EQ(images[1].offset, -2);
  }
}

TEST(kv_encode, format_names_are_the_mocker_flag_values) {
  EXPECT_EQ(parse_kv_event_format("vllm-map"), kv_event_format::vllm_map);
  EXPECT_EQ(to_string(kv_event_format::sglang), "sglang");
  EXPECT_FALSE(parse_kv_event_format("json").has_value());
}

}  // namespace
}  // namespace kvr
