#include "core/media/fetch_policy.hpp"

#include <algorithm>

namespace kvr {

std::expected<parsed_url, std::string> parse_http_url(std::string_view url) {
  parsed_url out;
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::unexpected("not an absolute URL");
  out.scheme = std::string(url.substr(0, scheme_end));
  std::transform(out.scheme.begin(), out.scheme.end(), out.scheme.begin(), [](unsigned char c) { return std::tolower(c); });
  if (out.scheme != "http" && out.scheme != "https") return std::unexpected("scheme " + out.scheme + " is not http or https");
  std::string_view rest = url.substr(scheme_end + 3);
  const auto path_start = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, path_start);
  std::string_view target = path_start == std::string_view::npos ? std::string_view("/") : rest.substr(path_start);
  if (const auto hash = target.find('#'); hash != std::string_view::npos) target = target.substr(0, hash);
  if (target.empty() || target[0] == '?') out.target = "/" + std::string(target);
  else out.target = std::string(target);
  if (authority.find('@') != std::string_view::npos) return std::unexpected("URLs with credentials are refused");
  if (authority.empty()) return std::unexpected("the URL has no host");
  if (authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return std::unexpected("malformed IPv6 host");
    out.host = std::string(authority.substr(1, close - 1));
    authority = authority.substr(close + 1);
    if (!authority.empty() && authority.front() != ':') return std::unexpected("malformed host");
    out.port = authority.empty() ? "" : std::string(authority.substr(1));
  } else {
    const auto colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    out.port = colon == std::string_view::npos ? "" : std::string(authority.substr(colon + 1));
  }
  if (out.host.empty()) return std::unexpected("the URL has no host");
  if (out.port.empty()) out.port = out.scheme == "https" ? "443" : "80";
  if (out.port.size() > 5 || out.port.find_first_not_of("0123456789") != std::string::npos || std::stoi(out.port) == 0 ||
      std::stoi(out.port) > 65535)
    return std::unexpected("bad port " + out.port);
  return out;
}

std::expected<parsed_url, std::string> resolve_location(const parsed_url& base, std::string_view location) {
  if (location.find("://") != std::string_view::npos) return parse_http_url(location);
  if (location.starts_with("//")) return parse_http_url(base.scheme + ":" + std::string(location));
  parsed_url out = base;
  if (location.starts_with("/")) {
    out.target = std::string(location);
  } else {
    const auto query = base.target.find('?');
    const std::string path = base.target.substr(0, query);
    out.target = path.substr(0, path.rfind('/') + 1) + std::string(location);
  }
  return out;
}

bool is_forbidden_address(const std::array<std::uint8_t, 4>& a) {
  return a[0] == 0 ||                                     // 0.0.0.0/8 ("this network")
         a[0] == 10 ||                                    // private
         a[0] == 127 ||                                   // loopback
         (a[0] == 100 && (a[1] & 0xC0) == 64) ||          // carrier-grade NAT 100.64/10
         (a[0] == 169 && a[1] == 254) ||                  // link-local (cloud metadata)
         (a[0] == 172 && (a[1] & 0xF0) == 16) ||          // private 172.16/12
         (a[0] == 192 && a[1] == 168) ||                  // private
         (a[0] == 192 && a[1] == 0 && a[2] == 0) ||       // IETF protocol assignments
         (a[0] == 198 && (a[1] & 0xFE) == 18) ||          // benchmarking 198.18/15
         a[0] >= 224;                                     // multicast, reserved, broadcast
}

bool is_forbidden_address(const std::array<std::uint8_t, 16>& b) {
  const bool zero_prefix = std::all_of(b.begin(), b.begin() + 10, [](std::uint8_t x) { return x == 0; });
  if (zero_prefix && b[10] == 0xff && b[11] == 0xff)  // IPv4-mapped: judge the IPv4 address
    return is_forbidden_address(std::array<std::uint8_t, 4>{b[12], b[13], b[14], b[15]});
  const bool all_zero_but_last = std::all_of(b.begin(), b.begin() + 15, [](std::uint8_t x) { return x == 0; });
  if (all_zero_but_last && (b[15] == 0 || b[15] == 1)) return true;  // :: and ::1
  return (b[0] & 0xFE) == 0xFC ||                   // unique local fc00::/7
         (b[0] == 0xFE && (b[1] & 0xC0) == 0x80) ||  // link-local fe80::/10
         b[0] == 0xFF ||                             // multicast
         (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) ||  // documentation
         (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b);    // NAT64 64:ff9b::/96
}

}  // namespace kvr
