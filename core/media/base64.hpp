#pragma once
/// Standard base64 (RFC 4648, with padding), through OpenSSL's EVP block routines.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvr {

[[nodiscard]] std::string base64_encode(std::span<const std::uint8_t> bytes);
/// Decodes `text`; nullopt unless its length is a multiple of 4, its characters are base64 and
/// at most two '=' end it.
[[nodiscard]] std::optional<std::vector<std::uint8_t>> base64_decode(std::string_view text);

}  // namespace kvr
