#include "core/kv/block_hash.hpp"

#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kvr {
namespace {

std::vector<std::uint64_t> as_u64(const nlohmann::json& strings) {
  std::vector<std::uint64_t> out;
  for (const auto& s : strings) out.push_back(std::stoull(s.get<std::string>()));
  return out;
}

TEST(block_hash, matches_the_golden_vectors_from_python_xxhash) {
  std::ifstream file(std::string(KVR_TEST_DATA_DIR) + "/block_hash_golden.json");
  ASSERT_TRUE(file) << "missing tests/data/block_hash_golden.json";
  const auto golden = nlohmann::json::parse(file);
  ASSERT_GE(golden["cases"].size(), 9u);
  std::vector<std::uint64_t> local;
  std::vector<std::uint64_t> sequence;
  for (const auto& c : golden["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto tokens = c["tokens"].get<std::vector<std::uint32_t>>();
    std::vector<image_span> images;
    for (const auto& image : c["images"])
      images.push_back({image["offset"].get<std::size_t>(), image["count"].get<std::size_t>(),
                        image["hash"].get<std::uint64_t>()});
    const std::string lora = c["lora_name"].get<std::string>();
    const std::string salt = c["cache_salt"].get<std::string>();
    compute_local_hashes(tokens, c["block_size"].get<std::uint32_t>(), images, {lora, salt}, local);
    compute_sequence_hashes(local, sequence);
    EXPECT_EQ(local, as_u64(c["local"]));
    EXPECT_EQ(sequence, as_u64(c["sequence"]));
  }
}

TEST(block_hash, agrees_with_dynamos_published_value_for_one_block) {
  // NVIDIA Dynamo's kv-router tests pin tokens [1, 2, 3, 4] at block size 4 to this hash.
  std::vector<std::uint64_t> local;
  compute_local_hashes(std::vector<std::uint32_t>{1, 2, 3, 4}, 4, {}, {}, local);
  ASSERT_EQ(local.size(), 1u);
  EXPECT_EQ(local[0], 14643705804678351452ull);
}

TEST(block_hash, only_full_blocks_are_hashed) {
  std::vector<std::uint64_t> local;
  compute_local_hashes(std::vector<std::uint32_t>(47, 9), 16, {}, {}, local);
  EXPECT_EQ(local.size(), 2u);
  compute_local_hashes(std::vector<std::uint32_t>(15, 9), 16, {}, {}, local);
  EXPECT_TRUE(local.empty());
}

TEST(block_hash, an_image_changes_exactly_the_blocks_it_covers) {
  const std::vector<std::uint32_t> tokens(64, 7);
  std::vector<std::uint64_t> plain;
  std::vector<std::uint64_t> with_image;
  compute_local_hashes(tokens, 16, {}, {}, plain);
  const image_span image{.token_offset = 20, .token_count = 16, .hash = 99};  // blocks 1 and 2
  compute_local_hashes(tokens, 16, std::span(&image, 1), {}, with_image);
  EXPECT_EQ(with_image[0], plain[0]);
  EXPECT_NE(with_image[1], plain[1]);
  EXPECT_NE(with_image[2], plain[2]);
  EXPECT_EQ(with_image[3], plain[3]);
}

TEST(block_hash, image_order_in_the_request_does_not_matter_within_a_block) {
  const std::vector<std::uint32_t> tokens(16, 1);
  const image_span ab[] = {{2, 2, 5}, {8, 2, 3}};
  const image_span ba[] = {{8, 2, 3}, {2, 2, 5}};
  std::vector<std::uint64_t> first;
  std::vector<std::uint64_t> second;
  compute_local_hashes(tokens, 16, ab, {}, first);
  compute_local_hashes(tokens, 16, ba, {}, second);
  EXPECT_EQ(first, second);
}

TEST(block_hash, the_cache_salt_changes_block_zero_and_through_the_chain_every_sequence_hash) {
  const std::vector<std::uint32_t> tokens(48, 3);
  std::vector<std::uint64_t> plain_local, salted_local, plain_seq, salted_seq;
  compute_local_hashes(tokens, 16, {}, {}, plain_local);
  compute_local_hashes(tokens, 16, {}, {.lora_name = {}, .cache_salt = "tenant"}, salted_local);
  EXPECT_NE(salted_local[0], plain_local[0]);
  EXPECT_EQ(salted_local[1], plain_local[1]);
  compute_sequence_hashes(plain_local, plain_seq);
  compute_sequence_hashes(salted_local, salted_seq);
  for (std::size_t i = 0; i < plain_seq.size(); ++i) EXPECT_NE(salted_seq[i], plain_seq[i]) << i;
}

TEST(block_hash, a_lora_adapter_changes_every_block) {
  const std::vector<std::uint32_t> tokens(32, 3);
  std::vector<std::uint64_t> base, adapted;
  compute_local_hashes(tokens, 16, {}, {}, base);
  compute_local_hashes(tokens, 16, {}, {.lora_name = "sql", .cache_salt = {}}, adapted);
  EXPECT_NE(adapted[0], base[0]);
  EXPECT_NE(adapted[1], base[1]);
}

TEST(block_hash, extending_a_chain_equals_hashing_the_whole_sequence) {
  std::vector<std::uint32_t> tokens(80);
  for (std::uint32_t i = 0; i < tokens.size(); ++i) tokens[i] = i * 31;
  std::vector<std::uint64_t> local, whole, extended;
  compute_local_hashes(tokens, 16, {}, {}, local);
  compute_sequence_hashes(local, whole);
  compute_sequence_hashes(std::span(local).first(2), extended);
  extend_sequence_hashes(extended.back(), std::span(local).subspan(2), extended);
  EXPECT_EQ(extended, whole);
}

}  // namespace
}  // namespace kvr
