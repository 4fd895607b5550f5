#pragma once
/// What the media fetcher may fetch: image URLs are named by clients, so fetching them is an
/// SSRF risk. Only http and https, and by default only public addresses: loopback, private,
/// carrier-grade NAT, link-local, multicast, unspecified and reserved ranges are refused (the
/// resolved address is checked, and again after every redirect).

#include <array>
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

#include "core/common/http_url.hpp"

namespace kvr {

/// IPv4 (network byte order in `octets`) and IPv6 addresses a client-named URL must not reach.
[[nodiscard]] bool is_forbidden_address(const std::array<std::uint8_t, 4>& octets);
[[nodiscard]] bool is_forbidden_address(const std::array<std::uint8_t, 16>& bytes);

}  // namespace kvr
