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

namespace kvr {

struct parsed_url {
  std::string scheme;  ///< http or https
  std::string host;    ///< without brackets for IPv6
  std::string port;    ///< explicit or the scheme's default
  std::string target;  ///< path and query, at least "/"
};

/// Parses an absolute http(s) URL; other schemes, userinfo and malformed URLs are errors.
[[nodiscard]] std::expected<parsed_url, std::string> parse_http_url(std::string_view url);
/// A redirect's `Location`, absolute or relative to `base`.
[[nodiscard]] std::expected<parsed_url, std::string> resolve_location(const parsed_url& base, std::string_view location);

/// IPv4 (network byte order in `octets`) and IPv6 addresses a client-named URL must not reach.
[[nodiscard]] bool is_forbidden_address(const std::array<std::uint8_t, 4>& octets);
[[nodiscard]] bool is_forbidden_address(const std::array<std::uint8_t, 16>& bytes);

}  // namespace kvr
