#include "actors/http/routing_table.hpp"

#include "core/common/http_url.hpp"

namespace kvr {

std::expected<worker_target, std::string> make_worker_target(std::string name, const std::string& url) {
  const auto parsed = parse_http_url(url);
  if (!parsed) return std::unexpected(parsed.error());
  worker_target target{.name = std::move(name), .url = url, .host = parsed->host, .port = parsed->port,
                       .tls = parsed->scheme == "https"};
  target.base_path = parsed->target.substr(0, parsed->target.find('?'));
  while (!target.base_path.empty() && target.base_path.back() == '/') target.base_path.pop_back();
  target.host_header = authority_of(*parsed);
  return target;
}

}  // namespace kvr
