#pragma once
/// Multimodal prompts as engines see them: a chat template renders one image placeholder token
/// per image (Qwen2-VL: `<|vision_start|><|image_pad|><|vision_end|>`), and the engine's
/// processor repeats that token as many times as the image occupies. The router does the same
/// before hashing, and mixes each image's hash into the blocks its run covers
/// (core/kv/block_hash's `image_span`), so the same text with another image is another prefix
/// from the image on, and the same image twice is the same prefix.

#include <cstdint>
#include <expected>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/kv/block_hash.hpp"
#include "core/config/router_file.hpp"

namespace kvr {

/// One image of a request, resolved: how many placeholder tokens it takes, and its hash.
struct resolved_image {
  std::uint32_t tokens = 0;
  std::uint64_t hash = 0;
};

/// Expands the i-th occurrence of `image_token_id` in `tokens` into `images[i].tokens` copies,
/// in place, and writes each run's span (with the image's hash) to `spans`. An error if the
/// rendered prompt holds a different number of placeholders than there are images.
[[nodiscard]] std::expected<void, std::string> splice_images(std::vector<std::uint32_t>& tokens, std::uint32_t image_token_id,
                                                             std::span<const resolved_image> images,
                                                             std::vector<image_span>& spans);

/// Where the text-only fallback ends: the position of the first image placeholder (the blocks
/// before it are exact whatever the images are), or tokens.size() if there is none.
[[nodiscard]] std::size_t text_prefix_length(std::span<const std::uint32_t> tokens, std::uint32_t image_token_id);

/// Resolves a `data:` URI image: decodes it, reads its dimensions, counts its placeholder tokens
/// with the set's card and hashes its bytes. Errors name the cause (not base64, not an image,
/// a size the engine would refuse).
[[nodiscard]] std::expected<resolved_image, std::string> resolve_data_uri_image(std::string_view uri,
                                                                                const multimodal_card& card,
                                                                                std::size_t max_bytes,
                                                                                std::size_t& bytes_hashed);

}  // namespace kvr
