#pragma once
/// Host name resolution for the media fetcher on a few threads of its own.
///
/// getaddrinfo blocks and cannot be interrupted, and Asio runs every asynchronous resolution of
/// an io_context on one internal thread, so one slow DNS server used to hold up every image
/// fetch queued behind it, with no deadline over the wait. Here lookups run on `threads`
/// threads (a slow one delays only the lookups behind it on its thread), a caller that has
/// given up (its deadline passed) abandons its lookup, which then never starts or is ignored
/// when it ends, and results are delivered on the caller's io_context. Destroying the resolver
/// never waits for a lookup stuck in getaddrinfo: its thread finishes on its own and delivers
/// nothing.

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>

namespace kvr {

class name_resolver {
 public:
  using endpoints = std::vector<boost::asio::ip::tcp::endpoint>;
  using done_fn = std::function<void(boost::system::error_code, endpoints)>;
  /// The blocking lookup itself; the system's resolver unless a test injects one.
  using lookup_fn = std::function<boost::system::error_code(const std::string& host, const std::string& port, endpoints&)>;

  /// The system's lookup (getaddrinfo through Asio's synchronous resolver).
  static lookup_fn system_lookup();

  name_resolver(boost::asio::io_context& deliver_to, std::size_t threads, lookup_fn lookup = system_lookup());
  ~name_resolver();
  name_resolver(const name_resolver&) = delete;
  name_resolver& operator=(const name_resolver&) = delete;

  /// Abandons its lookup when destroyed or reset; hold it while the lookup matters.
  using ticket = std::shared_ptr<void>;

  /// Resolves `host`:`port`; `done` runs on `deliver_to` unless the ticket was dropped first.
  [[nodiscard]] ticket resolve(std::string host, std::string port, done_fn done);

  struct state;  ///< shared with the threads, which may outlive the resolver

 private:
  std::shared_ptr<state> state_;
};

}  // namespace kvr
