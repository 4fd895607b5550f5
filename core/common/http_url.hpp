#pragma once
/// Absolute http(s) URLs as kvrouter reads them: worker base URLs from config, image URLs from
/// clients and the redirects their hosts answer with. IPv6 literals come in brackets
/// (`http://[::1]:8000`) and leave them in `host`.

#include <expected>
#include <optional>
#include <string>
#include <string_view>

namespace kvr {

struct parsed_url {
  std::string scheme;  ///< http or https
  std::string host;    ///< without brackets for IPv6
  std::string port;    ///< explicit or the scheme's default; 1 to 65535
  std::string target;  ///< path and query, at least "/"
};

/// Parses an absolute http(s) URL; other schemes, userinfo, ports outside 1-65535 and malformed
/// URLs are errors.
[[nodiscard]] std::expected<parsed_url, std::string> parse_http_url(std::string_view url);
/// A redirect's `Location`, absolute or relative to `base`.
[[nodiscard]] std::expected<parsed_url, std::string> resolve_location(const parsed_url& base, std::string_view location);
/// `host:port` as a Host header carries it (IPv6 hosts in brackets).
[[nodiscard]] std::string authority_of(const parsed_url& url);
/// The first value of query parameter `name` in a request target (`/ready?model=a%2Fb`),
/// percent-decoded and with `+` as a space; nullopt when absent or badly encoded.
[[nodiscard]] std::optional<std::string> query_parameter(std::string_view target, std::string_view name);
/// A path's part percent-decoded (`Qwen%2FQwen3` -> `Qwen/Qwen3`; `+` stays); nullopt when
/// badly encoded.
[[nodiscard]] std::optional<std::string> path_segment_decoded(std::string_view segment);

/// A request target in origin form (`/path?query`), as routes are matched on. An absolute-form
/// target (`http://host:port/path?query`, RFC 9112 §3.2.2, which a server must accept) yields its
/// path and query (`/` if it names no path); an origin-form one is itself; anything else
/// (`*`, authority form, garbage) is nullopt.
[[nodiscard]] std::optional<std::string_view> origin_form_target(std::string_view target);

}  // namespace kvr
