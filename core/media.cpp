#include "core/media.hpp"

#include <cfenv>
#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <webp/decode.h>
#include <xxhash.h>

// stb_image reads the PNG / JPEG / GIF / BMP headers; this is its one implementation unit.
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_GIF
#define STBI_ONLY_BMP
#define STBI_NO_STDIO
#define STBI_NO_LINEAR
#define STBI_NO_HDR
#define STBI_ASSERT(x) ((void)0)
#include <stb/stb_image.h>

namespace kvr {
namespace {

bool starts_with(std::span<const std::uint8_t> bytes, std::string_view magic) {
  return bytes.size() >= magic.size() && std::memcmp(bytes.data(), magic.data(), magic.size()) == 0;
}

/// The format from the magic bytes, if the prefix is long enough to tell.
std::expected<image_format, dims_error> sniff(std::span<const std::uint8_t> bytes, bool complete) {
  if (bytes.size() < 12 && !complete) return std::unexpected(dims_error::need_more_bytes);
  if (starts_with(bytes, "\x89PNG\r\n\x1a\n")) return image_format::png;
  if (starts_with(bytes, "\xff\xd8\xff")) return image_format::jpeg;
  if (starts_with(bytes, "GIF87a") || starts_with(bytes, "GIF89a")) return image_format::gif;
  if (starts_with(bytes, "BM")) return image_format::bmp;
  if (starts_with(bytes, "RIFF") && bytes.size() >= 12 && std::memcmp(bytes.data() + 8, "WEBP", 4) == 0)
    return image_format::webp;
  return std::unexpected(dims_error::not_an_image);
}

/// Python's round(): halves to even (the default floating-point rounding mode).
double round_half_even(double value) { return std::nearbyint(value); }

}  // namespace

std::string_view to_string(image_format format) {
  switch (format) {
    case image_format::png: return "png";
    case image_format::jpeg: return "jpeg";
    case image_format::gif: return "gif";
    case image_format::bmp: return "bmp";
    case image_format::webp: return "webp";
  }
  return "unknown";
}

std::expected<image_dims, dims_error> image_dimensions(std::span<const std::uint8_t> bytes, bool complete) {
  auto format = sniff(bytes, complete);
  if (!format) return std::unexpected(format.error());
  int width = 0, height = 0;
  if (*format == image_format::webp) {
    if (!WebPGetInfo(bytes.data(), bytes.size(), &width, &height))
      return std::unexpected(complete || bytes.size() >= 64 ? dims_error::not_an_image : dims_error::need_more_bytes);
  } else {
    int components = 0;
    if (bytes.size() > static_cast<std::size_t>(INT32_MAX) ||
        !stbi_info_from_memory(bytes.data(), static_cast<int>(bytes.size()), &width, &height, &components))
      // A JPEG's frame header may sit behind long metadata: only the whole file proves it corrupt.
      return std::unexpected(complete ? dims_error::not_an_image : dims_error::need_more_bytes);
  }
  if (width <= 0 || height <= 0) return std::unexpected(dims_error::not_an_image);
  return image_dims{static_cast<std::uint32_t>(width), static_cast<std::uint32_t>(height), *format};
}

std::expected<std::uint32_t, std::string> placeholder_tokens(const multimodal_card& card, image_dims dims) {
  if (card.rule == "fixed") return card.fixed_tokens;
  if (dims.width == 0 || dims.height == 0) return std::unexpected("an image side is 0");
  const double factor = static_cast<double>(card.patch_size) * card.merge_size;
  const double height = dims.height, width = dims.width;
  if (std::max(height, width) / std::min(height, width) > 200)
    return std::unexpected(fmt::format("aspect ratio {:.0f}:1 is over 200", std::max(height, width) / std::min(height, width)));
  double h_bar = std::max(factor, round_half_even(height / factor) * factor);
  double w_bar = std::max(factor, round_half_even(width / factor) * factor);
  if (h_bar * w_bar > static_cast<double>(card.max_pixels)) {
    const double beta = std::sqrt(height * width / static_cast<double>(card.max_pixels));
    h_bar = std::floor(height / beta / factor) * factor;
    w_bar = std::floor(width / beta / factor) * factor;
  } else if (h_bar * w_bar < static_cast<double>(card.min_pixels)) {
    const double beta = std::sqrt(static_cast<double>(card.min_pixels) / (height * width));
    h_bar = std::ceil(height * beta / factor) * factor;
    w_bar = std::ceil(width * beta / factor) * factor;
  }
  return static_cast<std::uint32_t>((h_bar / factor) * (w_bar / factor));
}

std::expected<data_uri, std::string> decode_data_uri(std::string_view uri, std::size_t max_bytes) {
  if (!uri.starts_with("data:")) return std::unexpected("not a data: URI");
  const auto comma = uri.find(',');
  if (comma == std::string_view::npos) return std::unexpected("a data: URI needs a ','");
  std::string_view meta = uri.substr(5, comma - 5);
  if (!meta.ends_with(";base64")) return std::unexpected("only base64 data: URIs carry images");
  data_uri out;
  out.media_type = std::string(meta.substr(0, meta.size() - 7));
  std::string_view payload = uri.substr(comma + 1);
  while (!payload.empty() && (payload.back() == '\n' || payload.back() == '\r' || payload.back() == ' ')) payload.remove_suffix(1);
  // Whole 4-character groups, just enough for max_bytes (each group decodes to 3 bytes).
  const std::size_t groups_needed = (max_bytes + 2) / 3;
  std::size_t take = std::min(payload.size(), groups_needed * 4);
  take -= take % 4;
  out.complete = take == payload.size();
  if (payload.size() % 4 != 0 && out.complete) return std::unexpected("base64 payload length is not a multiple of 4");
  out.bytes.resize(take / 4 * 3);
  const int n = EVP_DecodeBlock(out.bytes.data(), reinterpret_cast<const unsigned char*>(payload.data()), static_cast<int>(take));
  if (n < 0) return std::unexpected("invalid base64 in the data: URI");
  std::size_t size = static_cast<std::size_t>(n);
  if (out.complete)  // EVP_DecodeBlock counts the padding's zero bytes
    for (std::size_t i = payload.size(); i > 0 && payload[i - 1] == '='; --i) --size;
  out.bytes.resize(std::min(size, out.complete ? size : max_bytes));
  return out;
}

std::uint64_t image_hash_of_url(std::string_view url) { return XXH3_64bits(url.data(), url.size()); }
std::uint64_t image_hash_of_bytes(std::span<const std::uint8_t> bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

}  // namespace kvr
