#pragma once
/// Reading an HTTP message with a bound on its whole head. Beast (Boost 1.74) checks its
/// header limit against the bytes of one parse step only, and a step consumes every complete
/// field it saw: a peer that sends fields without end is never stopped, and they pile up in the
/// message. This read counts what the parser consumed until the head is done.

#include <cstddef>
#include <cstdint>
#include <utility>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>

namespace kvr {

/// Reads into `parser` (not eager: a step stops at the end of the head) until its head is done,
/// then calls `handler(error_code, head_bytes)`; fails with http::error::header_limit once the
/// head passes `limit` bytes, in one step (the parser's own limit, set here) or in all.
/// `stream`, `buffer` and `parser` must outlive the read.
template <class Stream, class Parser, class Handler>
void async_read_head_bounded(Stream& stream, boost::beast::flat_buffer& buffer, Parser& parser, std::uint32_t limit,
                             Handler&& handler, std::size_t so_far = 0) {
  namespace http = boost::beast::http;
  if (so_far == 0) parser.header_limit(limit);
  http::async_read_some(stream, buffer, parser,
                        [&stream, &buffer, &parser, limit, so_far, handler = std::forward<Handler>(handler)](
                            boost::beast::error_code ec, std::size_t used) mutable {
                          const std::size_t head = so_far + used;
                          if (!ec && !parser.is_header_done() && head > limit) ec = http::error::header_limit;
                          if (ec || parser.is_header_done()) return handler(ec, head);
                          async_read_head_bounded(stream, buffer, parser, limit, std::move(handler), head);
                        });
}

/// A whole message read with Beast's async_read, its head first through async_read_head_bounded:
/// `handler(error_code, std::size_t)` runs once, with the head's error or the read's.
template <class Stream, class Parser, class Handler>
void async_read_bounded(Stream& stream, boost::beast::flat_buffer& buffer, Parser& parser, std::uint32_t head_limit,
                        Handler handler) {
  async_read_head_bounded(stream, buffer, parser, head_limit,
                          [&stream, &buffer, &parser, handler = std::move(handler)](boost::beast::error_code ec,
                                                                                   std::size_t head) mutable {
                            if (ec) return handler(ec, head);
                            boost::beast::http::async_read(stream, buffer, parser, std::move(handler));
                          });
}

}  // namespace kvr
