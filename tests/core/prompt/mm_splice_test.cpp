#include "core/prompt/mm_splice.hpp"

#include <gtest/gtest.h>

#include "core/media/base64.hpp"
#include "core/prompt/chat_template.hpp"
#include "core/kv/kv_wire.hpp"
#include "core/routing/prefix_index.hpp"

namespace kvr {
namespace {

constexpr std::uint32_t pad = 9;

TEST(splice_images, each_placeholder_becomes_its_images_run_with_the_images_hash) {
  std::vector<std::uint32_t> tokens = {1, 2, pad, 3, pad, 4};
  const std::vector<resolved_image> images = {{3, 0xaaa}, {2, 0xbbb}};
  std::vector<image_span> spans;
  ASSERT_TRUE(splice_images(tokens, pad, images, spans));
  EXPECT_EQ(tokens, (std::vector<std::uint32_t>{1, 2, pad, pad, pad, 3, pad, pad, 4}));
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].token_offset, 2u);
  EXPECT_EQ(spans[0].token_count, 3u);
  EXPECT_EQ(spans[0].hash, 0xaaau);
  EXPECT_EQ(spans[1].token_offset, 6u);
  EXPECT_EQ(spans[1].hash, 0xbbbu);
}

TEST(splice_images, a_count_mismatch_is_an_error_and_the_text_prefix_ends_at_the_first_image) {
  std::vector<std::uint32_t> tokens = {1, 2, pad, 3};
  std::vector<image_span> spans;
  EXPECT_FALSE(splice_images(tokens, pad, {}, spans));
  EXPECT_EQ(text_prefix_length(tokens, pad), 2u);
  EXPECT_EQ(text_prefix_length(std::vector<std::uint32_t>{1, 2}, pad), 2u);
}

TEST(splice_images, blocks_differ_from_the_first_image_on_and_match_before_it) {
  const std::vector<std::uint32_t> text(32, 5);  // two full blocks of text, then the image
  auto hashes_with = [&](std::uint64_t image_hash) {
    std::vector<std::uint32_t> tokens = text;
    tokens.push_back(pad);
    tokens.insert(tokens.end(), 16, 6);
    std::vector<image_span> spans;
    const std::vector<resolved_image> images = {{20, image_hash}};
    EXPECT_TRUE(splice_images(tokens, pad, images, spans));
    std::vector<std::uint64_t> local, sequence;
    compute_local_hashes(tokens, 16, spans, {}, local);
    compute_sequence_hashes(local, sequence);
    return sequence;
  };
  const auto a = hashes_with(1), a_again = hashes_with(1), b = hashes_with(2);
  EXPECT_EQ(a, a_again);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(a[0], b[0]);
  EXPECT_EQ(a[1], b[1]);
  for (std::size_t i = 2; i < a.size(); ++i) EXPECT_NE(a[i], b[i]) << "block " << i;
}

TEST(splice_images, the_routers_image_blocks_equal_those_an_engine_reports_with_the_images_identifier) {
  // 16 text tokens, then an image of 20 placeholder tokens (blocks 1 and 2 cover it), then text.
  std::vector<std::uint32_t> tokens(16, 5);
  tokens.push_back(pad);
  tokens.insert(tokens.end(), 28, 6);
  const std::uint64_t image_hash = 0x0123456789abcdefull;
  std::vector<image_span> spans;
  ASSERT_TRUE(splice_images(tokens, pad, std::vector<resolved_image>{{20, image_hash}}, spans));
  std::vector<std::uint64_t> local, sequence;
  compute_local_hashes(tokens, 16, spans, {}, local);
  compute_sequence_hashes(local, sequence);
  ASSERT_EQ(sequence.size(), 4u);

  // vLLM's BlockStored for the same prompt: extra_keys name the image (a 64-hex digest whose
  // first 16 digits are the hash) on every block it overlaps, with its offset in the block.
  const std::string digest = "0123456789abcdef" + std::string(48, '0');
  kv_stored stored;
  stored.block_hashes = {101, 102, 103, 104};
  stored.token_ids = tokens;
  stored.block_size = 16;
  for (std::uint32_t block : {1u, 2u})
    stored.images.push_back({.block = block, .hash = image_hash_of_identifier(digest), .offset = block == 1 ? 0 : -16, .identifier = digest});
  prefix_index index(16, 1024);
  ASSERT_TRUE(index.apply_stored(0, stored));
  std::vector<std::uint32_t> overlaps;
  EXPECT_EQ(index.find_matches(sequence, overlaps), 4u) << "every block, images included, matches";
  EXPECT_EQ(overlaps[0], 4u);
}

TEST(resolve_data_uri_image, a_png_data_uri_gives_qwen2_vl_tokens_and_a_byte_hash) {
  // A 56 x 84 PNG header (signature, IHDR) is all the dimensions need.
  const unsigned char png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R',
                               0, 0, 0, 56, 0, 0, 0, 84, 8, 2, 0, 0, 0, 0, 0, 0, 0};
  const std::string uri = "data:image/png;base64," + base64_encode({png, sizeof(png)});
  multimodal_card card;  // qwen2-vl: 28-pixel tiles
  std::size_t hashed = 0;
  auto image = resolve_data_uri_image(uri, card, 1 << 20, hashed);
  ASSERT_TRUE(image) << image.error();
  EXPECT_EQ(image->tokens, (56 / 28) * (84 / 28));
  EXPECT_EQ(hashed, sizeof(png));
  EXPECT_FALSE(resolve_data_uri_image("data:image/png;base64,AAAA", card, 1 << 20, hashed));
}

TEST(chat_template, templates_that_loop_over_content_get_its_parts_as_vllm_detects) {
  auto chat = chat_template::from_source(
      "{% for m in messages %}{% for p in m.content %}{% if p.type == 'image' %}<img>{% else %}{{ p.text }}{% endif %}"
      "{% endfor %}{% endfor %}");
  ASSERT_TRUE(chat);
  const std::string messages =
      R"([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "b"}]}])";
  EXPECT_TRUE(chat->wants_content_parts()) << "it loops over m.content";
  EXPECT_EQ(*chat->render({.messages_json = messages}), "a<img>b");
  auto strings = chat_template::from_source("{% for m in messages %}{{ m.content }}{% endfor %}");
  EXPECT_FALSE(strings->wants_content_parts());
  EXPECT_EQ(*strings->render({.messages_json = messages}), "a\nb");
}

}  // namespace
}  // namespace kvr
