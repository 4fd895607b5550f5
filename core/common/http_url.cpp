#include "core/common/http_url.hpp"

#include <algorithm>
#include <optional>

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

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> percent_decoded(std::string_view text, bool plus_is_space) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+' && plus_is_space) {
      out += ' ';
    } else if (text[i] != '%') {
      out += text[i];
    } else {
      if (i + 2 >= text.size()) return std::nullopt;
      const int high = hex_value(text[i + 1]), low = hex_value(text[i + 2]);
      if (high < 0 || low < 0) return std::nullopt;
      out += static_cast<char>(high * 16 + low);
      i += 2;
    }
  }
  return out;
}

}  // namespace

std::optional<std::string> query_parameter(std::string_view target, std::string_view name) {
  const std::size_t question = target.find('?');
  if (question == std::string_view::npos) return std::nullopt;
  std::string_view query = target.substr(question + 1);
  query = query.substr(0, query.find('#'));
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const std::size_t eq = pair.find('=');
    const auto key = percent_decoded(pair.substr(0, eq), true);
    if (!key || *key != name) continue;
    return percent_decoded(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), true);
  }
  return std::nullopt;
}

std::optional<std::string> path_segment_decoded(std::string_view segment) { return percent_decoded(segment, false); }

std::optional<std::string_view> origin_form_target(std::string_view target) {
  if (target.starts_with('/')) return target;
  std::size_t scheme_end = 0;
  for (std::string_view scheme : {"http://", "https://"})
    if (target.size() >= scheme.size() &&
        std::equal(scheme.begin(), scheme.end(), target.begin(), [](char a, char b) { return a == (b | 0x20); }))
      scheme_end = scheme.size();
  if (scheme_end == 0) return std::nullopt;
  const std::size_t path = target.find_first_of("/?", scheme_end);
  if (path == scheme_end) return std::nullopt;  // no authority
  if (path == std::string_view::npos) return std::string_view("/");
  if (target[path] == '?') return std::nullopt;  // "http://h?q": a query without a path; no route is named so
  return target.substr(path);
}

}  // namespace kvr
