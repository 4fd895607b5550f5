#include "actors/http/routing_table.hpp"

namespace kvr {

worker_target make_worker_target(std::string name, const std::string& url) {
  worker_target target{std::move(name), url, {}, {}, {}, {}};
  std::string_view rest(url);
  std::string default_port = "80";
  if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else {
    return target;  // https to workers is not supported; host stays empty
  }
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) target.base_path = std::string(rest.substr(slash));
  while (!target.base_path.empty() && target.base_path.back() == '/') target.base_path.pop_back();
  const auto colon = authority.rfind(':');
  if (colon != std::string_view::npos && authority.find(']') == std::string_view::npos) {
    target.host = std::string(authority.substr(0, colon));
    target.port = std::string(authority.substr(colon + 1));
  } else {
    target.host = std::string(authority);
    target.port = default_port;
  }
  target.host_header = target.host + ":" + target.port;
  return target;
}

}  // namespace kvr
