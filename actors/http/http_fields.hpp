#pragma once
/// Which header fields cross the proxy, and how kvrouter writes the ones it writes itself.

#include <iterator>
#include <string>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/message.hpp>

namespace kvr::ingress {

/// The request header that asks for a routing decision instead of an answer.
inline constexpr boost::beast::string_view dry_run_header = "x-kvrouter-dry-run";
/// The request header that sets a request's class in its set's queue: high, normal or low.
inline constexpr boost::beast::string_view priority_header = "x-kvrouter-priority";
/// The request header that pins a request to one worker of its set, by name (canaries,
/// debugging); in answers, the same name says where a request went.
inline constexpr boost::beast::string_view worker_header = "x-kvrouter-worker";

/// Fields that describe one hop's connection, never forwarded (RFC 9110 §7.6.1), plus those
/// kvrouter writes itself (framing, Host), its own routing headers, and the client's
/// `Authorization` unless `forward_authorization` (its key is kvrouter's to check).
inline bool is_request_field_replaced(const boost::beast::http::fields::value_type& field, bool forward_authorization) {
  namespace http = boost::beast::http;
  switch (field.name()) {
    case http::field::authorization: return !forward_authorization;
    case http::field::connection:
    case http::field::keep_alive:
    case http::field::transfer_encoding:
    case http::field::te:
    case http::field::upgrade:
    case http::field::proxy_authorization:
    case http::field::host:
    case http::field::content_length:
    case http::field::expect:  // the whole body goes along at once: no 100 Continue to wait for
      return true;
    default:
      return boost::beast::iequals(field.name_string(), dry_run_header) ||
             boost::beast::iequals(field.name_string(), priority_header) ||
             boost::beast::iequals(field.name_string(), worker_header);
  }
}

inline bool is_response_field_replaced(boost::beast::http::field name) {
  namespace http = boost::beast::http;
  return name == http::field::connection || name == http::field::keep_alive || name == http::field::transfer_encoding ||
         name == http::field::content_length;
}

/// Whether `name` is listed in the message's `Connection` field (`listed`, as sent): such
/// fields describe that hop only and are never forwarded (RFC 9110 §7.6.1).
inline bool is_named_in_connection(boost::beast::string_view listed, boost::beast::string_view name) {
  while (!listed.empty()) {
    const auto comma = listed.find(',');
    auto token = listed.substr(0, comma);
    while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) token.remove_prefix(1);
    while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
    if (!token.empty() && boost::beast::iequals(token, name)) return true;
    if (comma == boost::beast::string_view::npos) break;
    listed.remove_prefix(comma + 1);
  }
  return false;
}

/// Whether a request with these framing fields can be read safely (RFC 9112 §6): a
/// Transfer-Encoding must end in chunked (else the body's end is unknowable), and a message
/// must not carry both Transfer-Encoding and Content-Length (a request-smuggling vector).
/// Empty when it can, else why not.
inline std::string framing_problem(const boost::beast::http::fields& fields) {
  namespace http = boost::beast::http;
  const auto te = fields.find(http::field::transfer_encoding);
  if (te == fields.end()) return {};
  if (fields.find(http::field::content_length) != fields.end()) return "Transfer-Encoding and Content-Length together";
  auto codings = te->value();
  while (!codings.empty() && (codings.back() == ' ' || codings.back() == '\t')) codings.remove_suffix(1);
  const auto comma = codings.rfind(',');
  auto last = comma == boost::beast::string_view::npos ? codings : codings.substr(comma + 1);
  while (!last.empty() && (last.front() == ' ' || last.front() == '\t')) last.remove_prefix(1);
  if (!boost::beast::iequals(last, "chunked")) return "a Transfer-Encoding that does not end in chunked";
  return {};
}

/// Whether a request names its target's host as RFC 9112 §3.2 requires: one Host field, which
/// an HTTP/1.1 request must have. A server must refuse others with 400; proxies that disagree
/// on which of two Host fields counts are how a request reaches a host it should not. Empty
/// when it does, else why not.
inline std::string host_problem(const boost::beast::http::request_header<>& header) {
  const auto [first, end] = header.equal_range(boost::beast::http::field::host);
  if (first == end) return header.version() >= 11 ? "an HTTP/1.1 request without a Host field" : "";
  if (std::next(first) != end) return "more than one Host field";
  return {};
}

inline void append_field(std::string& out, boost::beast::string_view name, boost::beast::string_view value) {
  out.append(name.data(), name.size());
  out += ": ";
  out.append(value.data(), value.size());
  out += "\r\n";
}

}  // namespace kvr::ingress
