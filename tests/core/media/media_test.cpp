#include "core/media/media.hpp"

#include <string>

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <webp/encode.h>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

namespace kvr {
namespace {

std::vector<std::uint8_t> pixels(int w, int h, int channels) {
  std::vector<std::uint8_t> out(static_cast<std::size_t>(w * h * channels));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::uint8_t>(i * 7);
  return out;
}

void append(void* context, void* data, int size) {
  auto* out = static_cast<std::vector<std::uint8_t>*>(context);
  out->insert(out->end(), static_cast<std::uint8_t*>(data), static_cast<std::uint8_t*>(data) + size);
}

std::vector<std::uint8_t> png(int w, int h) {
  std::vector<std::uint8_t> out;
  stbi_write_png_to_func(append, &out, w, h, 3, pixels(w, h, 3).data(), w * 3);
  return out;
}
std::vector<std::uint8_t> jpeg(int w, int h) {
  std::vector<std::uint8_t> out;
  stbi_write_jpg_to_func(append, &out, w, h, 3, pixels(w, h, 3).data(), 90);
  return out;
}
std::vector<std::uint8_t> bmp(int w, int h) {
  std::vector<std::uint8_t> out;
  stbi_write_bmp_to_func(append, &out, w, h, 3, pixels(w, h, 3).data());
  return out;
}
std::vector<std::uint8_t> webp(int w, int h, const char* kind) {
  std::uint8_t* data = nullptr;
  std::size_t size = 0;
  const auto rgba = pixels(w, h, 4);
  if (std::string(kind) == "lossless") size = WebPEncodeLosslessRGB(pixels(w, h, 3).data(), w, h, w * 3, &data);
  else if (std::string(kind) == "alpha") size = WebPEncodeRGBA(rgba.data(), w, h, w * 4, 80, &data);  // VP8X + ALPH
  else size = WebPEncodeRGB(pixels(w, h, 3).data(), w, h, w * 3, 80, &data);
  std::vector<std::uint8_t> out(data, data + size);
  WebPFree(data);
  return out;
}
/// A GIF's header and logical screen descriptor, then an empty trailer.
std::vector<std::uint8_t> gif(int w, int h) {
  return {'G', 'I', 'F', '8', '9', 'a', static_cast<std::uint8_t>(w & 0xff), static_cast<std::uint8_t>(w >> 8),
          static_cast<std::uint8_t>(h & 0xff), static_cast<std::uint8_t>(h >> 8), 0x00, 0x00, 0x00, 0x3b};
}
/// A progressive JPEG's start: SOI, then an SOF2 frame header (3 components).
std::vector<std::uint8_t> progressive_jpeg(int w, int h) {
  return {0xff, 0xd8, 0xff, 0xc2, 0x00, 0x11, 0x08, static_cast<std::uint8_t>(h >> 8), static_cast<std::uint8_t>(h & 0xff),
          static_cast<std::uint8_t>(w >> 8), static_cast<std::uint8_t>(w & 0xff), 0x03, 0x01, 0x22, 0x00, 0x02, 0x11,
          0x01, 0x03, 0x11, 0x01};
}

void expect_dims(const std::vector<std::uint8_t>& file, std::uint32_t w, std::uint32_t h, image_format format) {
  auto dims = image_dimensions(file, true);
  ASSERT_TRUE(dims) << to_string(format);
  EXPECT_EQ(dims->width, w) << to_string(format);
  EXPECT_EQ(dims->height, h) << to_string(format);
  EXPECT_EQ(dims->format, format);
}

TEST(media, reads_the_dimensions_of_every_format) {
  expect_dims(png(33, 17), 33, 17, image_format::png);
  expect_dims(jpeg(640, 480), 640, 480, image_format::jpeg);
  expect_dims(progressive_jpeg(1920, 1080), 1920, 1080, image_format::jpeg);
  expect_dims(gif(300, 200), 300, 200, image_format::gif);
  expect_dims(bmp(31, 7), 31, 7, image_format::bmp);
  expect_dims(webp(123, 45, "lossy"), 123, 45, image_format::webp);
  expect_dims(webp(64, 32, "lossless"), 64, 32, image_format::webp);
  expect_dims(webp(50, 60, "alpha"), 50, 60, image_format::webp);
}

TEST(media, a_short_prefix_asks_for_more_bytes_and_garbage_is_not_an_image) {
  const auto file = png(100, 100);
  EXPECT_EQ(image_dimensions(std::span(file).first(10), false).error(), dims_error::need_more_bytes);
  EXPECT_TRUE(image_dimensions(std::span(file).first(33), false)) << "PNG's IHDR is in the first 33 bytes";
  const std::vector<std::uint8_t> garbage(100, 0x42);
  EXPECT_EQ(image_dimensions(garbage, true).error(), dims_error::not_an_image);
  EXPECT_EQ(image_dimensions(std::span(file).first(20), true).error(), dims_error::not_an_image);
}

TEST(media, a_jpeg_whose_tables_broke_stb_image_is_read_safely) {
  // Found by tests/fuzz (media): stb_image's header reader built this file's Huffman table out
  // of bounds. kvrouter's own reader skips the table by its length.
  const std::vector<std::uint8_t> file{255, 216, 255, 196, 47, 194, 0, 17, 61, 39, 8, 34, 0, 2, 17, 1, 3, 0, 100};
  EXPECT_FALSE(image_dimensions(file, true));
  EXPECT_EQ(image_dimensions(file, false).error(), dims_error::need_more_bytes);
}

TEST(media, qwen2_vl_token_counts_follow_smart_resize) {
  const multimodal_card card;  // patch 14, merge 2, min 56*56, max 14*14*4*1280
  struct row {
    std::uint32_t h, w, tokens;
  };
  // Expected values from Qwen2-VL's smart_resize (Python, round half to even).
  const row rows[] = {{224, 224, 64}, {1080, 1920, 1222}, {10, 10, 4}, {28, 28, 4}, {42, 42, 4},
                      {70, 98, 8},    {14, 700, 25},      {4000, 3000, 1230}, {100, 50, 8}};
  for (const row& r : rows) EXPECT_EQ(placeholder_tokens(card, {r.w, r.h, image_format::png}), r.tokens) << r.h << "x" << r.w;
  EXPECT_FALSE(placeholder_tokens(card, {1, 300, image_format::png})) << "aspect ratio over 200";
}

TEST(media, the_fixed_rule_gives_the_cards_count) {
  multimodal_card card;
  card.rule = "fixed";
  EXPECT_EQ(placeholder_tokens(card, {10, 5000, image_format::png}), 576u);
}

TEST(media, data_uris_decode_only_as_far_as_asked) {
  const auto file = png(40, 30);
  std::string base64((file.size() + 2) / 3 * 4, '\0');
  base64.resize(static_cast<std::size_t>(EVP_EncodeBlock(reinterpret_cast<unsigned char*>(base64.data()), file.data(),
                                                        static_cast<int>(file.size()))));
  const std::string uri = "data:image/png;base64," + base64;
  auto whole = decode_data_uri(uri, 1u << 20);
  ASSERT_TRUE(whole);
  EXPECT_TRUE(whole->complete);
  EXPECT_EQ(whole->media_type, "image/png");
  EXPECT_EQ(whole->bytes, file);
  auto header = decode_data_uri(uri, 64);
  ASSERT_TRUE(header);
  EXPECT_FALSE(header->complete);
  EXPECT_EQ(header->bytes.size(), 64u);
  EXPECT_EQ(image_dimensions(header->bytes, false)->width, 40u);
  EXPECT_FALSE(decode_data_uri("data:image/png,rawbytes", 10));
  EXPECT_FALSE(decode_data_uri("http://x/y.png", 10));
  EXPECT_FALSE(decode_data_uri("data:image/png;base64,@@@@", 10));
  EXPECT_FALSE(decode_data_uri("data:;base64,====", 10)) << "found by tests/fuzz: four '=' once wrapped the size";
}

TEST(media, image_hashes_tell_images_apart) {
  const auto a = png(10, 10), b = png(10, 11);
  EXPECT_NE(image_hash_of_bytes(a), image_hash_of_bytes(b));
  EXPECT_EQ(image_hash_of_bytes(a), image_hash_of_bytes(png(10, 10)));
  EXPECT_NE(image_hash_of_url("https://x/a.png"), image_hash_of_url("https://x/b.png"));
}

}  // namespace
}  // namespace kvr
