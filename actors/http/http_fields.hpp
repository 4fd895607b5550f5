#pragma once
/// Which header fields cross the proxy, and how kvrouter writes the ones it writes itself.

#include <string>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/fields.hpp>

namespace kvr::ingress {

/// The request header that asks for a routing decision instead of an answer.
inline constexpr boost::beast::string_view dry_run_header = "x-kvrouter-dry-run";

/// Fields that describe one hop's connection, never forwarded (RFC 9110 §7.6.1), plus those
/// kvrouter writes itself (framing, Host) and its own dry-run switch.
inline bool is_request_field_replaced(const boost::beast::http::fields::value_type& field) {
  namespace http = boost::beast::http;
  switch (field.name()) {
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
      return boost::beast::iequals(field.name_string(), dry_run_header);
  }
}

inline bool is_response_field_replaced(boost::beast::http::field name) {
  namespace http = boost::beast::http;
  return name == http::field::connection || name == http::field::keep_alive || name == http::field::transfer_encoding ||
         name == http::field::content_length;
}

inline void append_field(std::string& out, boost::beast::string_view name, boost::beast::string_view value) {
  out.append(name.data(), name.size());
  out += ": ";
  out.append(value.data(), value.size());
  out += "\r\n";
}

}  // namespace kvr::ingress
