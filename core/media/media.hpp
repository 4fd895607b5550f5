#pragma once
/// Images as routing sees them: dimensions from a file's first bytes (PNG, JPEG including
/// progressive, GIF, BMP read at their documented offsets; WebP through libwebp), the placeholder-token count they turn into for a model family,
/// and the 64-bit image hash mixed into the blocks they cover (docs/architecture.md §4).

#include <cstdint>
#include <expected>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/config/router_file.hpp"

namespace kvr {

enum class image_format : std::uint8_t { png, jpeg, gif, bmp, webp };
[[nodiscard]] std::string_view to_string(image_format format);

struct image_dims {
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  image_format format = image_format::png;
};

enum class dims_error : std::uint8_t {
  need_more_bytes,  ///< the prefix ends before the header does: fetch more
  not_an_image,     ///< not a supported format, or a corrupt header
};

/// Dimensions from the first bytes of an image file. `complete`: `bytes` is the whole file, so
/// a header that does not fit is corrupt rather than cut short.
[[nodiscard]] std::expected<image_dims, dims_error> image_dimensions(std::span<const std::uint8_t> bytes, bool complete);

/// Placeholder tokens an image occupies. `fixed`: the card's count (LLaVA-style). `qwen2-vl`:
/// the image is resized to multiples of patch_size * merge_size within [min_pixels,
/// max_pixels] (Qwen2-VL's smart_resize), then tokens = (h / factor) * (w / factor). An empty
/// result: the engine would refuse the image (aspect ratio over 200, or a zero side).
[[nodiscard]] std::expected<std::uint32_t, std::string> placeholder_tokens(const multimodal_card& card, image_dims dims);

/// A `data:` URI's payload, base64-decoded; at most `max_bytes` of it (decoding stops there, so
/// dimensions need only the header's share of a large image).
struct data_uri {
  std::string media_type;             ///< e.g. image/png
  std::vector<std::uint8_t> bytes;
  bool complete = false;              ///< the whole payload was decoded
};
[[nodiscard]] std::expected<data_uri, std::string> decode_data_uri(std::string_view uri, std::size_t max_bytes);

/// The image hash: XXH3-64 of the URL string for URL images (fetching the image to hash its
/// bytes would cost a download per request; the URL names the same content for the engine's
/// own cache key in practice), of the decoded bytes for data URIs (the bytes are at hand).
[[nodiscard]] std::uint64_t image_hash_of_url(std::string_view url);
[[nodiscard]] std::uint64_t image_hash_of_bytes(std::span<const std::uint8_t> bytes);

}  // namespace kvr
