#include "core/kv/kv_wire.hpp"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "core/kv/kv_encode.hpp"

namespace kvr {
namespace {

std::vector<std::uint8_t> from_hex(std::string_view hex) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<std::uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return out;
}

/// name -> payload, from a TSV whose last column is the payload hex.
std::map<std::string, std::vector<std::uint8_t>> load_vectors(const std::string& file) {
  std::map<std::string, std::vector<std::uint8_t>> out;
  std::ifstream in(std::string(KVR_TEST_DATA_DIR) + "/kv_events/" + file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    out[line.substr(0, line.find('\t'))] = from_hex(line.substr(line.rfind('\t') + 1));
  }
  return out;
}

const auto& shared_vectors() {
  static const auto vectors = load_vectors("vectors.tsv");
  return vectors;
}
const auto& extra_vectors() {
  static const auto vectors = load_vectors("extra_vectors.tsv");
  return vectors;
}

kv_batch decode(const std::vector<std::uint8_t>& payload) {
  kv_wire_decoder decoder;
  kv_batch batch;
  auto result = decoder.decode_batch(payload, batch);
  EXPECT_TRUE(result) << (result ? "" : result.error().message);
  return batch;
}

const std::vector<std::uint32_t> tokens_1_to_4{1, 2, 3, 4};

TEST(kv_wire, every_shared_vector_is_present) {
  EXPECT_EQ(shared_vectors().size(), 8u);
  EXPECT_EQ(extra_vectors().size(), 10u);
}

TEST(kv_wire, decodes_a_vllm_map_store_with_a_uint64_hash) {
  const kv_batch batch = decode(shared_vectors().at("vllm_map_int_hash"));
  EXPECT_EQ(batch.timestamp, 1.5);
  EXPECT_EQ(batch.dp_rank, 0);
  ASSERT_EQ(batch.events.size(), 1u);
  const auto& stored = std::get<kv_stored>(batch.events[0]);
  EXPECT_EQ(stored.block_hashes, (std::vector<std::uint64_t>{0x1122334455667788}));
  EXPECT_FALSE(stored.parent_block_hash);
  EXPECT_EQ(stored.token_ids, tokens_1_to_4);
  EXPECT_EQ(stored.block_size, 4u);
  EXPECT_FALSE(stored.lora_id);
  EXPECT_EQ(stored.medium, "GPU");
  EXPECT_EQ(stored.lora_name, "");
  EXPECT_TRUE(stored.images.empty());
  EXPECT_EQ(stored.group_idx, 0);
  EXPECT_EQ(stored.kv_cache_spec_kind, "full_attention");
  EXPECT_EQ(batch.unknown_events, 0u);
}

TEST(kv_wire, folds_a_32_byte_bin_hash_to_its_last_8_bytes_big_endian) {
  const kv_batch batch = decode(shared_vectors().at("vllm_map_bin_hash"));
  ASSERT_EQ(batch.events.size(), 1u);
  const auto& stored = std::get<kv_stored>(batch.events[0]);
  EXPECT_EQ(stored.block_hashes, (std::vector<std::uint64_t>{0x18191a1b1c1d1e1f}));
  EXPECT_FALSE(stored.parent_block_hash);
  EXPECT_EQ(stored.token_ids, tokens_1_to_4);
  EXPECT_EQ(stored.block_size, 4u);
  EXPECT_EQ(stored.medium, "GPU");
  EXPECT_EQ(batch.timestamp, 1.5);
  EXPECT_EQ(batch.dp_rank, 0);
}

TEST(kv_wire, decodes_single_map_events) {
  kv_wire_decoder decoder;
  auto removed = decoder.decode_event(shared_vectors().at("vllm_map_block_removed_event"));
  ASSERT_TRUE(removed);
  const auto& r = std::get<kv_removed>(*removed);
  EXPECT_EQ(r.block_hashes, (std::vector<std::uint64_t>{7, 8}));
  EXPECT_EQ(r.medium, "GPU");
  EXPECT_EQ(r.group_idx, 0);
  auto cleared = decoder.decode_event(shared_vectors().at("vllm_map_all_cleared_event"));
  ASSERT_TRUE(cleared);
  EXPECT_TRUE(std::holds_alternative<kv_cleared>(*cleared));
}

TEST(kv_wire, decodes_the_vllm_array_form_with_all_twelve_fields) {
  const kv_batch batch = decode(shared_vectors().at("vllm_array_g3"));
  EXPECT_EQ(batch.timestamp, 1.5);
  EXPECT_EQ(batch.dp_rank, 0);
  ASSERT_EQ(batch.events.size(), 3u);
  const auto& stored = std::get<kv_stored>(batch.events[0]);
  EXPECT_EQ(stored.block_hashes, (std::vector<std::uint64_t>{0x1122334455667788}));
  EXPECT_FALSE(stored.parent_block_hash);
  EXPECT_EQ(stored.token_ids, tokens_1_to_4);
  EXPECT_EQ(stored.block_size, 4u);
  EXPECT_FALSE(stored.lora_id);
  EXPECT_EQ(stored.medium, "GPU");
  EXPECT_EQ(stored.lora_name, "");
  EXPECT_TRUE(stored.images.empty());
  EXPECT_EQ(stored.group_idx, 0);
  EXPECT_EQ(stored.kv_cache_spec_kind, "full_attention");
  EXPECT_FALSE(stored.sliding_window);
  const auto& removed = std::get<kv_removed>(batch.events[1]);
  EXPECT_EQ(removed.block_hashes, (std::vector<std::uint64_t>{0x1122334455667788}));
  EXPECT_EQ(removed.medium, "GPU");
  EXPECT_EQ(removed.group_idx, 0);
  EXPECT_TRUE(std::holds_alternative<kv_cleared>(batch.events[2]));
}

TEST(kv_wire, decodes_the_older_seven_element_array_form) {
  const kv_batch batch = decode(shared_vectors().at("vllm_array_g2"));
  ASSERT_EQ(batch.events.size(), 2u);
  const auto& stored = std::get<kv_stored>(batch.events[0]);
  EXPECT_EQ(stored.token_ids, tokens_1_to_4);
  EXPECT_EQ(stored.block_size, 4u);
  EXPECT_EQ(stored.medium, "GPU");
  EXPECT_EQ(stored.lora_name, "");
  EXPECT_FALSE(stored.group_idx);
  const auto& removed = std::get<kv_removed>(batch.events[1]);
  EXPECT_EQ(removed.medium, "GPU");
  EXPECT_FALSE(removed.group_idx);
  EXPECT_EQ(batch.dp_rank, 0);
}

TEST(kv_wire, decodes_the_two_element_envelope_of_vllm_0_9) {
  const kv_batch batch = decode(shared_vectors().at("vllm_array_g0"));
  EXPECT_EQ(batch.timestamp, 1.5);
  EXPECT_FALSE(batch.dp_rank);
  ASSERT_EQ(batch.events.size(), 1u);
  const auto& stored = std::get<kv_stored>(batch.events[0]);
  EXPECT_EQ(stored.block_hashes, (std::vector<std::uint64_t>{5}));
  EXPECT_EQ(stored.token_ids, tokens_1_to_4);
  EXPECT_EQ(stored.block_size, 4u);
  EXPECT_EQ(stored.medium, "");
}

TEST(kv_wire, keeps_sglangs_signed_hashes_as_their_bit_pattern) {
  const kv_batch batch = decode(shared_vectors().at("sglang_array_int64"));
  ASSERT_EQ(batch.events.size(), 1u);
  const auto& stored = std::get<kv_stored>(batch.events[0]);
  EXPECT_EQ(stored.block_hashes, (std::vector<std::uint64_t>{static_cast<std::uint64_t>(-0x0123456789abcdefll)}));
  EXPECT_EQ(stored.token_ids, tokens_1_to_4);
  EXPECT_EQ(stored.block_size, 4u);
  EXPECT_EQ(stored.medium, "GPU");
  EXPECT_EQ(batch.dp_rank, 0);
}

TEST(kv_wire, reads_the_cache_salt_from_sglangs_metadata_map) {
  const kv_batch batch = decode(extra_vectors().at("sglang_8_element_store_with_metadata_map"));
  const auto& stored = std::get<kv_stored>(batch.events.at(0));
  EXPECT_EQ(stored.block_hashes, (std::vector<std::uint64_t>{static_cast<std::uint64_t>(-5), 6}));
  EXPECT_EQ(stored.parent_block_hash, 3u);
  EXPECT_EQ(stored.token_ids.size(), 8u);
  EXPECT_EQ(stored.cache_salt, "s1");
  EXPECT_EQ(stored.lora_name, "");
}

TEST(kv_wire, takes_the_first_token_of_each_eagle_pair) {
  const kv_batch batch = decode(extra_vectors().at("sglang_eagle_token_pairs"));
  const auto& stored = std::get<kv_stored>(batch.events.at(0));
  EXPECT_EQ(stored.token_ids, tokens_1_to_4);
  EXPECT_EQ(stored.block_hashes, (std::vector<std::uint64_t>{10}));
}

TEST(kv_wire, reads_lora_images_with_offsets_and_the_salt_from_extra_keys) {
  const kv_batch batch = decode(extra_vectors().at("vllm_map_lora_images_salt"));
  EXPECT_EQ(batch.dp_rank, 1);
  const auto& stored = std::get<kv_stored>(batch.events.at(0));
  EXPECT_EQ(stored.lora_name, "sql-lora");
  EXPECT_EQ(stored.cache_salt, "tenant-7");
  ASSERT_EQ(stored.images.size(), 2u);
  EXPECT_EQ(stored.images[0].block, 0u);
  EXPECT_EQ(stored.images[0].offset, 2);
  EXPECT_EQ(stored.images[0].hash, 0x0123456789abcdefull) << "a hex digest's first 16 digits";
  EXPECT_EQ(stored.images[1].block, 1u);
  EXPECT_EQ(stored.images[1].offset, -3);
  EXPECT_EQ(stored.images[1].identifier, "img-b");
  EXPECT_EQ(stored.images[1].hash, image_hash_of_identifier("img-b"));
  EXPECT_NE(stored.images[1].hash, 0u);
}

TEST(kv_wire, reads_bare_image_identifiers_of_older_engines) {
  const kv_batch batch = decode(extra_vectors().at("vllm_array_bare_identifier"));
  const auto& stored = std::get<kv_stored>(batch.events.at(0));
  ASSERT_EQ(stored.images.size(), 1u);
  EXPECT_EQ(stored.images[0].block, 0u);
  EXPECT_EQ(stored.images[0].hash, 0x0123456789abcdefull);
  EXPECT_EQ(stored.cache_salt, "") << "a hex digest is an image, not a salt";
  EXPECT_EQ(stored.kv_cache_spec_kind, "full_attention");
}

TEST(kv_wire, skips_an_unknown_tag_and_keeps_the_rest_of_a_mixed_batch) {
  const kv_batch batch = decode(extra_vectors().at("mixed_batch_with_unknown_tag"));
  EXPECT_EQ(batch.unknown_events, 1u);
  EXPECT_EQ(batch.dp_rank, 2);
  ASSERT_EQ(batch.events.size(), 3u);
  EXPECT_EQ(std::get<kv_stored>(batch.events[0]).block_hashes, (std::vector<std::uint64_t>{41}));
  EXPECT_EQ(std::get<kv_removed>(batch.events[1]).medium, "CPU");
  EXPECT_TRUE(std::holds_alternative<kv_cleared>(batch.events[2]));
}

TEST(kv_wire, decodes_a_map_envelope) {
  const kv_batch batch = decode(extra_vectors().at("map_envelope"));
  EXPECT_EQ(batch.timestamp, 4.0);
  EXPECT_EQ(batch.dp_rank, 3);
  ASSERT_EQ(batch.events.size(), 1u);
  EXPECT_EQ(std::get<kv_removed>(batch.events[0]).block_hashes, (std::vector<std::uint64_t>{7}));
}

TEST(kv_wire, ignores_extra_trailing_elements) {
  const kv_batch batch = decode(extra_vectors().at("trailing_elements"));
  EXPECT_FALSE(batch.dp_rank);
  ASSERT_EQ(batch.events.size(), 2u);
  EXPECT_EQ(std::get<kv_stored>(batch.events[0]).block_hashes, (std::vector<std::uint64_t>{51}));
  EXPECT_EQ(std::get<kv_stored>(batch.events[0]).kv_cache_spec_kind, "full_attention");
  EXPECT_EQ(std::get<kv_removed>(batch.events[1]).group_idx, 0);
}

TEST(kv_wire, keeps_the_tier_of_a_store_on_another_medium) {
  const kv_batch batch = decode(extra_vectors().at("other_tier_store"));
  const auto& stored = std::get<kv_stored>(batch.events.at(0));
  EXPECT_EQ(stored.medium, "CPU_PINNED");
  EXPECT_FALSE(is_gpu_tier(stored.medium));
  EXPECT_TRUE(is_gpu_tier(""));
  EXPECT_TRUE(is_gpu_tier("GPU"));
}

TEST(kv_wire, folds_short_bin_hashes_and_parents) {
  const kv_batch batch = decode(extra_vectors().at("bin_parent_hash"));
  const auto& stored = std::get<kv_stored>(batch.events.at(0));
  EXPECT_EQ(stored.block_hashes, (std::vector<std::uint64_t>{0x08090a0b0c0d0e0full}));
  EXPECT_EQ(stored.parent_block_hash, 0x18191a1b1c1d1e1full);
}

TEST(kv_wire, skips_and_counts_a_malformed_event_inside_a_good_batch) {
  const kv_batch batch = decode(extra_vectors().at("malformed_event_in_good_batch"));
  EXPECT_EQ(batch.malformed_events, 1u);
  EXPECT_NE(batch.first_error.find("block_hashes"), std::string::npos) << batch.first_error;
  ASSERT_EQ(batch.events.size(), 1u);
  EXPECT_EQ(std::get<kv_removed>(batch.events[0]).block_hashes, (std::vector<std::uint64_t>{8}));
}

TEST(kv_wire, rejects_every_truncation_of_every_vector) {
  kv_wire_decoder decoder;
  kv_batch batch;
  for (const auto* vectors : {&shared_vectors(), &extra_vectors()})
    for (const auto& [name, payload] : *vectors) {
      if (name.ends_with("_event")) continue;  // single events, not batches
      for (std::size_t cut = 0; cut < payload.size(); ++cut)
        EXPECT_FALSE(decoder.decode_batch(std::span(payload).first(cut), batch)) << name << " cut at " << cut;
    }
}

TEST(kv_wire, rejects_absurd_lengths_without_allocating_them) {
  kv_wire_decoder decoder;
  kv_batch batch;
  // An array header declaring 2^32-1 elements, then nothing.
  const std::vector<std::uint8_t> huge_array{0xdd, 0xff, 0xff, 0xff, 0xff};
  EXPECT_EQ(decoder.decode_batch(huge_array, batch).error().message, "truncated msgpack");
  // A str header declaring 4 GiB.
  const std::vector<std::uint8_t> huge_str{0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0xdb, 0xff, 0xff, 0xff, 0xff};
  EXPECT_FALSE(decoder.decode_batch(huge_str, batch));
}

TEST(kv_wire, rejects_deep_nesting) {
  kv_wire_decoder decoder;
  kv_batch batch;
  std::vector<std::uint8_t> deep(100000, 0x91);  // [[[[...
  deep.push_back(0xc0);
  EXPECT_EQ(decoder.decode_batch(deep, batch).error().message, "msgpack nested too deeply");
}

TEST(kv_wire, rejects_wrong_types_with_a_message_naming_the_field) {
  kv_wire_decoder decoder;
  kv_batch batch;
  EXPECT_EQ(decoder.decode_batch(std::vector<std::uint8_t>{0x2a}, batch).error().message,
            "batch: expected an array or a map envelope");
  // [1.5, "x"]: events not an array.
  const std::vector<std::uint8_t> events_str{0x92, 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0xa1, 'x'};
  EXPECT_EQ(decoder.decode_batch(events_str, batch).error().message, "batch: events must be an array");
  // Trailing garbage after a complete batch.
  std::vector<std::uint8_t> trailing = shared_vectors().at("vllm_array_g0");
  trailing.push_back(0x00);
  EXPECT_EQ(decoder.decode_batch(trailing, batch).error().message, "bytes after the msgpack value");
}

TEST(kv_wire, image_identifiers_hash_like_the_request_side) {
  EXPECT_EQ(image_hash_of_identifier(std::string(64, 'a')), 0xaaaaaaaaaaaaaaaaull);
  EXPECT_EQ(image_hash_of_identifier("ABCDEF0123456789" + std::string(48, '0')), 0xabcdef0123456789ull);
  EXPECT_NE(image_hash_of_identifier("cat.png"), image_hash_of_identifier("dog.png"));
}

TEST(kv_wire, a_payload_over_the_limit_is_refused_before_parsing) {
  std::vector<std::uint8_t> huge(kv_wire_decoder::max_payload_bytes + 1, 0x01);
  kv_wire_decoder decoder;
  kv_batch batch;
  auto decoded = decoder.decode_batch(huge, batch);
  ASSERT_FALSE(decoded);
  EXPECT_NE(decoded.error().message.find("exceeds the 4194304-byte limit"), std::string::npos) << decoded.error().message;
}

TEST(kv_wire, an_event_naming_more_images_than_tokens_is_malformed) {
  // One BlockStored of one 2-token block whose extra_keys name three images.
  kv_stored stored{.block_hashes = {7}, .token_ids = {1, 2}, .block_size = 2};
  for (int i = 0; i < 3; ++i) stored.images.push_back({.block = 0, .hash = 0, .offset = 0, .identifier = fmt::format("img{}", i)});
  kv_batch one;
  one.events.push_back(stored);
  const auto payload = encode_kv_batch(one);
  kv_wire_decoder decoder;
  kv_batch batch;
  ASSERT_TRUE(decoder.decode_batch(payload, batch));
  EXPECT_TRUE(batch.events.empty());
  EXPECT_EQ(batch.malformed_events, 1u);
  EXPECT_NE(batch.first_error.find("more images than tokens"), std::string::npos) << batch.first_error;
}

}  // namespace
}  // namespace kvr
