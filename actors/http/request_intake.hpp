#pragma once
/// From a client's HTTP request to what its exchange routes: the set its `model` names (or the
/// only set) and the request as the router reads it (`routing_request`), or the answer
/// kvrouter gives at once (an error, or `/tokenize` answered with the set's own tokenizer).
/// Completions and chats are read in full only when their set reads the prompt; every other
/// route the engines serve is read by its body's `model` (JSON or multipart).
///
/// Not part of the ingress's interface: include actors/http/http_ingress.hpp instead.

#include "actors/http/own_routes.hpp"  // first: Asio wants <utility> before it under g++ 12

#include <expected>
#include <memory>

#include <boost/beast/http.hpp>

namespace kvr::ingress {

/// A request kvrouter routes to a worker of `set` (which `table` holds).
struct request_to_route {
  std::shared_ptr<const routing_table> table;
  const worker_set_route* set = nullptr;
  routing_request request;
};
using intake = std::expected<request_to_route, local_answer>;

/// `POST /v1/chat/completions` or `/v1/completions` (`endpoint` says which). The body's buffer
/// may grow by the JSON parser's padding (reserved as it arrived: no copy).
[[nodiscard]] intake read_completion(http_ingress::impl& server, io_thread& thread,
                                     boost::beast::http::request<boost::beast::http::string_body>& request, api_endpoint endpoint);
/// Any other route the engines serve: `path` is the target's part before `?`.
[[nodiscard]] intake read_passthrough(http_ingress::impl& server, io_thread& thread,
                                      boost::beast::http::request<boost::beast::http::string_body>& request, std::string_view path);

}  // namespace kvr::ingress
