#pragma once
/// The router's front door: an OpenAI-compatible HTTP server (Boost.Beast, one io_context
/// thread per core) that asks each worker set's actors for a worker and proxies the request
/// there, streaming the answer back chunk by chunk. Not a CAF actor: it talks to actors with
/// `anon_send` and gets answers through a sink that posts back to the connection's thread.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "actors/http/routing_table.hpp"

namespace kvr {

struct ingress_settings {
  std::string host = "0.0.0.0";
  std::uint16_t port = 8080;              ///< 0 = any free port (see http_ingress::port())
  std::size_t threads = 0;                ///< I/O threads; 0 = one per core
  std::uint64_t max_body_bytes = 32u << 20;
  std::uint32_t max_header_bytes = 64u << 10;
  /// Longest a client may take to send a whole request (keep-alive idle time included) or to
  /// accept a chunk of the answer: slow clients cannot hold a connection forever.
  std::chrono::seconds client_timeout{60};
  std::chrono::seconds connect_timeout{5};
  /// Longest wait for a worker's next bytes (the first ones include its prefill).
  std::chrono::seconds upstream_timeout{600};
  std::uint32_t max_retries = 2;          ///< re-routes after a worker fails before answering
  std::uint32_t max_routing_in_flight = 1024;  ///< per worker set; beyond, 503 at once
};

class http_ingress {
 public:
  /// Binds the listening socket(s); throws std::runtime_error naming the address on failure.
  explicit http_ingress(ingress_settings settings);
  ~http_ingress();
  http_ingress(const http_ingress&) = delete;
  http_ingress& operator=(const http_ingress&) = delete;

  /// Installs a new routing table; requests in flight keep the one they started with.
  void set_routing_table(std::shared_ptr<const routing_table> table);

  [[nodiscard]] std::uint16_t port() const;

  /// Serves on `settings.threads` threads until stop(); blocks the caller (it serves too).
  void run();
  /// Thread-safe; run() returns soon after.
  void stop();

  struct impl;  ///< the server's state (shared with its sessions; defined in the .cpp)

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace kvr
