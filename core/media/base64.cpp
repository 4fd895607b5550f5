#include "core/media/base64.hpp"

#include <openssl/evp.h>

namespace kvr {

std::string base64_encode(std::span<const std::uint8_t> bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes.data(), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::optional<std::vector<std::uint8_t>> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::size_t padding = 0;
  while (padding < text.size() && text[text.size() - 1 - padding] == '=') ++padding;
  if (padding > 2) return std::nullopt;
  std::vector<std::uint8_t> out(text.size() / 4 * 3);
  if (text.empty()) return out;
  const int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0 || static_cast<std::size_t>(n) < padding) return std::nullopt;
  out.resize(static_cast<std::size_t>(n) - padding);  // EVP_DecodeBlock counts the padding as zero bytes
  return out;
}

}  // namespace kvr
