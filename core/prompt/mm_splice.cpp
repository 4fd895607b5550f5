#include "core/prompt/mm_splice.hpp"

#include <algorithm>

#include "core/media/media.hpp"

namespace kvr {

std::expected<void, std::string> splice_images(std::vector<std::uint32_t>& tokens, std::uint32_t image_token_id,
                                               std::span<const resolved_image> images, std::vector<image_span>& spans) {
  spans.clear();
  const auto slots = static_cast<std::size_t>(std::count(tokens.begin(), tokens.end(), image_token_id));
  if (slots != images.size())
    return std::unexpected("the rendered prompt has " + std::to_string(slots) + " image placeholders for " +
                           std::to_string(images.size()) + " images");
  if (images.empty()) return {};
  std::size_t extra = 0;
  for (const resolved_image& image : images) extra += image.tokens > 0 ? image.tokens - 1 : 0;
  std::vector<std::uint32_t> out;
  out.reserve(tokens.size() + extra);
  std::size_t next = 0;
  for (std::uint32_t token : tokens) {
    if (token != image_token_id) {
      out.push_back(token);
      continue;
    }
    const resolved_image& image = images[next++];
    spans.push_back({out.size(), image.tokens, image.hash});
    out.insert(out.end(), image.tokens, image_token_id);
  }
  tokens = std::move(out);
  return {};
}

std::size_t text_prefix_length(std::span<const std::uint32_t> tokens, std::uint32_t image_token_id) {
  return static_cast<std::size_t>(std::find(tokens.begin(), tokens.end(), image_token_id) - tokens.begin());
}

std::expected<resolved_image, std::string> resolve_data_uri_image(std::string_view uri, const multimodal_card& card,
                                                                  std::size_t max_bytes, std::size_t& bytes_hashed) {
  auto decoded = decode_data_uri(uri, max_bytes);
  if (!decoded) return std::unexpected(decoded.error());
  if (!decoded->complete) return std::unexpected("the image is larger than " + std::to_string(max_bytes) + " bytes");
  auto dims = image_dimensions(decoded->bytes, true);
  if (!dims) return std::unexpected(std::string("not a supported image (PNG, JPEG, GIF, BMP, WebP)"));
  auto tokens = placeholder_tokens(card, *dims);
  if (!tokens) return std::unexpected(tokens.error());
  bytes_hashed += decoded->bytes.size();
  return resolved_image{*tokens, image_hash_of_bytes(decoded->bytes)};
}

}  // namespace kvr
