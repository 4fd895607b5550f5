#include "core/common/http_url.hpp"

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

std::string authority_of(const parsed_url& url) {
  const bool ipv6 = url.host.find(':') != std::string::npos;
  return (ipv6 ? "[" + url.host + "]" : url.host) + ":" + url.port;
}

}  // namespace kvr
