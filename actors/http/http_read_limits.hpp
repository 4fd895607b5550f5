#pragma once
/// How many bytes a Beast HTTP parser may leave unparsed in a connection's read buffer: a head,
/// a chunk's size line with its extensions, or a chunked body's trailer, waiting for the line
/// or blank line that ends it. Beast (Boost 1.74) bounds a head by its header limit, but not a
/// chunk line or a trailer: without a bound, a peer that never ends one grows the buffer until a
/// timeout. And Beast throws std::length_error for a trailer field of more than 65533 bytes,
/// from inside the read, out of the I/O thread. A buffer that holds at most 64 KiB bounds the
/// first and cannot hold the second.

#include <cstddef>
#include <cstdint>

#include <boost/beast/core/flat_buffer.hpp>

namespace kvr {

inline constexpr std::size_t max_unparsed_http_bytes = 64 << 10;
/// The longest head kvrouter reads from a worker, an engine's /metrics or an image server.
inline constexpr std::uint32_t max_answer_head_bytes = 64 << 10;

/// A read buffer for Beast's HTTP reads that holds at most max_unparsed_http_bytes: a read that
/// would need more fails with http::error::buffer_overflow.
inline boost::beast::flat_buffer bounded_http_read_buffer() { return boost::beast::flat_buffer(max_unparsed_http_bytes); }

}  // namespace kvr
