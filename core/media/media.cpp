#include "core/media/media.hpp"

#include "core/media/base64.hpp"

#include <cfenv>
#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <webp/decode.h>
#include <xxhash.h>


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

std::uint32_t be16(const std::uint8_t* p) { return (std::uint32_t{p[0]} << 8) | p[1]; }
std::uint32_t be32(const std::uint8_t* p) { return (be16(p) << 16) | be16(p + 2); }
std::uint32_t le16(const std::uint8_t* p) { return (std::uint32_t{p[1]} << 8) | p[0]; }
std::uint32_t le32(const std::uint8_t* p) { return (le16(p + 2) << 16) | le16(p); }

/// The dimensions a header holds at fixed offsets, once `needed` bytes are there.
std::expected<image_dims, dims_error> fixed_header(std::span<const std::uint8_t> bytes, bool complete, std::size_t needed,
                                                   auto read) {
  if (bytes.size() < needed) return std::unexpected(complete ? dims_error::not_an_image : dims_error::need_more_bytes);
  return read(bytes.data());
}

/// JPEG: walk the marker segments to the first frame header (SOF0..SOF15 but DHT, JPG, DAC),
/// which holds height and width. Segments are skipped by their length; nothing else is read.
/// (stb_image's header reader, used at first, builds Huffman tables on the way and wrote out of
/// bounds on a fuzzed file.)
std::expected<image_dims, dims_error> jpeg_dims(std::span<const std::uint8_t> bytes, bool complete) {
  const auto more = [&] { return std::unexpected(complete ? dims_error::not_an_image : dims_error::need_more_bytes); };
  std::size_t at = 2;  // after SOI
  for (;;) {
    while (at < bytes.size() && bytes[at] != 0xff) ++at;   // tolerate fill bytes between segments
    while (at < bytes.size() && bytes[at] == 0xff) ++at;   // and repeated 0xff
    if (at >= bytes.size()) return more();
    const std::uint8_t marker = bytes[at++];
    if (marker == 0xd8 || marker == 0x01 || (marker >= 0xd0 && marker <= 0xd7)) continue;  // no length
    if (marker == 0xd9 || marker == 0xda) return std::unexpected(dims_error::not_an_image);  // EOI / SOS before a frame
    if (at + 2 > bytes.size()) return more();
    const std::uint32_t length = be16(&bytes[at]);
    if (length < 2) return std::unexpected(dims_error::not_an_image);
    const bool frame = marker >= 0xc0 && marker <= 0xcf && marker != 0xc4 && marker != 0xc8 && marker != 0xcc;
    if (frame) {
      if (length < 7) return std::unexpected(dims_error::not_an_image);
      if (at + 7 > bytes.size()) return more();
      return image_dims{be16(&bytes[at + 5]), be16(&bytes[at + 3]), image_format::jpeg};
    }
    at += length;
  }
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
  std::expected<image_dims, dims_error> dims = std::unexpected(dims_error::not_an_image);
  switch (*format) {
    case image_format::png:  // signature, IHDR length and type, then width and height
      dims = fixed_header(bytes, complete, 24, [](const std::uint8_t* p) -> std::expected<image_dims, dims_error> {
        if (std::memcmp(p + 12, "IHDR", 4) != 0) return std::unexpected(dims_error::not_an_image);
        return image_dims{be32(p + 16), be32(p + 20), image_format::png};
      });
      break;
    case image_format::gif:  // logical screen descriptor
      dims = fixed_header(bytes, complete, 10, [](const std::uint8_t* p) -> std::expected<image_dims, dims_error> {
        return image_dims{le16(p + 6), le16(p + 8), image_format::gif};
      });
      break;
    case image_format::bmp:  // file header, then a DIB header: OS/2 (16-bit sides) or Windows (32-bit, signed)
      dims = fixed_header(bytes, complete, 26, [](const std::uint8_t* p) -> std::expected<image_dims, dims_error> {
        if (le32(p + 14) == 12) return image_dims{le16(p + 18), le16(p + 20), image_format::bmp};
        const auto height = static_cast<std::int32_t>(le32(p + 22));  // negative: stored top-down
        return image_dims{le32(p + 18), static_cast<std::uint32_t>(height < 0 ? -static_cast<std::int64_t>(height) : height),
                          image_format::bmp};
      });
      break;
    case image_format::jpeg: dims = jpeg_dims(bytes, complete); break;
    case image_format::webp: {
      int width = 0, height = 0;
      if (WebPGetInfo(bytes.data(), bytes.size(), &width, &height))
        dims = image_dims{static_cast<std::uint32_t>(width), static_cast<std::uint32_t>(height), image_format::webp};
      else
        dims = std::unexpected(complete || bytes.size() >= 64 ? dims_error::not_an_image : dims_error::need_more_bytes);
      break;
    }
  }
  if (dims && (dims->width == 0 || dims->height == 0 || dims->width > (1u << 30) || dims->height > (1u << 30)))
    return std::unexpected(dims_error::not_an_image);
  return dims;
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
  if (out.complete && payload.size() % 4 != 0) return std::unexpected("base64 payload length is not a multiple of 4");
  auto decoded = base64_decode(payload.substr(0, take));
  if (!decoded) return std::unexpected("invalid base64 in the data: URI");
  out.bytes = std::move(*decoded);
  if (!out.complete && out.bytes.size() > max_bytes) out.bytes.resize(max_bytes);
  return out;
}

std::uint64_t image_hash_of_url(std::string_view url) { return XXH3_64bits(url.data(), url.size()); }
std::uint64_t image_hash_of_bytes(std::span<const std::uint8_t> bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

}  // namespace kvr
