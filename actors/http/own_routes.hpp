#pragma once
/// The routes kvrouter answers itself, with no worker: `/health`, `/ready`, `/v1/models`,
/// `/metrics`, the status page and its data, `/v1/router/sets`, and the fault injector. Every
/// other route is the engines' and passes through (actors/http/ingress_session.cpp).
///
/// Not part of the ingress's interface: include actors/http/http_ingress.hpp instead.

#include "actors/http/ingress_server.hpp"  // first: Asio wants <utility> before it under g++ 12

#include <string>
#include <string_view>

namespace kvr::ingress {

/// An answer kvrouter writes itself.
struct local_answer {
  unsigned status = 200;
  std::string body;
  std::string_view content_type = "application/json";
};

/// Whether kvrouter answers `path` itself (GET only; `/v1/router/faults` is POST and separate).
[[nodiscard]] bool is_own_route(std::string_view path);
/// The answer to `GET target` (`path` is its part before `?`), one of kvrouter's own routes.
[[nodiscard]] local_answer answer_own_route(http_ingress::impl& server, std::string_view path, std::string_view target);
/// `POST /v1/router/faults` `{"set": NAME, "component": kv_subscriber | health_checker |
/// media_fetcher | scorer | hasher}`: the watcher kills it as a crash would (and restarts it).
[[nodiscard]] local_answer answer_fault(http_ingress::impl& server, const std::string& body);

}  // namespace kvr::ingress
