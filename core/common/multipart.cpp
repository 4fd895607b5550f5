#include "core/common/multipart.hpp"

#include <algorithm>
#include <cctype>
#include <string>

namespace kvr {
namespace {

constexpr std::size_t max_part_header_bytes = 8192;

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// The value of parameter `key` in `; key=value; ...` (quoted or not; no escapes inside quotes,
/// as browsers send them).
std::optional<std::string_view> parameter(std::string_view header, std::string_view key) {
  std::size_t at = header.find(';');
  while (at != std::string_view::npos) {
    std::string_view rest = header.substr(at + 1);
    const std::size_t next = rest.find(';');
    std::string_view item = trim(rest.substr(0, next));
    const std::size_t eq = item.find('=');
    if (eq != std::string_view::npos && iequals(trim(item.substr(0, eq)), key)) {
      std::string_view value = trim(item.substr(eq + 1));
      if (value.size() >= 2 && value.front() == '"') {
        // A quoted value may hold ';': take it up to its closing quote in the whole header.
        const std::size_t start = static_cast<std::size_t>(value.data() - header.data()) + 1;
        const std::size_t close = header.find('"', start);
        if (close == std::string_view::npos) return std::nullopt;
        return header.substr(start, close - start);
      }
      return value;
    }
    at = next == std::string_view::npos ? std::string_view::npos : at + 1 + next;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string_view> multipart_boundary(std::string_view content_type) {
  const std::string_view type = trim(content_type.substr(0, content_type.find(';')));
  if (!iequals(type, "multipart/form-data")) return std::nullopt;
  const auto boundary = parameter(content_type, "boundary");
  if (!boundary || boundary->empty() || boundary->size() > 70) return std::nullopt;
  return boundary;
}

std::optional<std::string_view> multipart_field(std::string_view body, std::string_view boundary, std::string_view name) {
  if (boundary.empty()) return std::nullopt;
  const std::string delimiter = "--" + std::string(boundary);
  const std::string between = "\r\n" + delimiter;
  // The first delimiter opens the body (a preamble before it is allowed).
  std::size_t at = 0;
  if (body.starts_with(delimiter)) {
    at = delimiter.size();
  } else {
    at = body.find(between);
    if (at == std::string_view::npos) return std::nullopt;
    at += between.size();
  }
  for (;;) {
    if (body.substr(at).starts_with("--")) return std::nullopt;  // the closing delimiter
    const std::size_t line_end = body.find("\r\n", at);
    if (line_end == std::string_view::npos) return std::nullopt;
    const std::size_t headers_start = line_end + 2;
    const std::size_t headers_end = body.find("\r\n\r\n", line_end);
    if (headers_end == std::string_view::npos || headers_end - line_end > max_part_header_bytes) return std::nullopt;
    const std::size_t content_start = headers_end + 4;
    const std::size_t content_end = body.find(between, content_start);
    if (content_end == std::string_view::npos) return std::nullopt;
    // Its headers, one per line: is it `Content-Disposition: form-data; name="NAME"`?
    std::string_view headers = headers_end > headers_start ? body.substr(headers_start, headers_end - headers_start)
                                                           : std::string_view{};
    while (!headers.empty()) {
      const std::size_t end = headers.find("\r\n");
      const std::string_view line = headers.substr(0, end);
      headers = end == std::string_view::npos ? std::string_view{} : headers.substr(end + 2);
      const std::size_t colon = line.find(':');
      if (colon == std::string_view::npos || !iequals(trim(line.substr(0, colon)), "content-disposition")) continue;
      const std::string_view value = line.substr(colon + 1);
      const auto part_name = parameter(value, "name");
      if (iequals(trim(value.substr(0, value.find(';'))), "form-data") && part_name && *part_name == name)
        return body.substr(content_start, content_end - content_start);
    }
    at = content_end + between.size();
  }
}

}  // namespace kvr
