#pragma once
/// The router's front door: an OpenAI-compatible HTTP server (Boost.Beast, one io_context
/// thread per core) that asks each worker set's actors for a worker and proxies the request
/// there, streaming the answer back chunk by chunk. Not a CAF actor: it talks to actors with
/// `anon_send` and gets answers through a sink that posts back to the connection's thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "actors/http/ingress_settings.hpp"
#include "actors/http/routing_table.hpp"

namespace kvr {

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

  /// Where `POST /v1/router/faults` (with --fault-injection) sends its (set, component).
  void set_fault_injector(std::function<void(std::string set, std::string component)> inject);
  /// Families other parts of the process add to `/metrics` (called on an I/O thread; set before
  /// serving).
  void set_metrics_writer(std::function<void(std::string& out)> write);
  /// Why /ready must still answer 503 although workers are routable (a new replica warming
  /// up); none = ready. Called on I/O threads with the current table; set before serving.
  void set_readiness_gate(std::function<std::optional<std::string>(const routing_table&)> not_ready);
  /// A JSON object `/v1/router/sets` shows under "replication" (replica sync); set before serving.
  void set_replication_status(std::function<std::string()> status);

  /// Serves on `settings.threads` threads until stop() or a drain ends; blocks the caller (it
  /// serves too).
  void run();
  /// Thread-safe; run() returns soon after, cutting whatever is in flight.
  void stop();
  /// Thread-safe: a graceful stop. /ready answers 503 at once and every answer from now on
  /// carries `Connection: close`; idle keep-alive connections close; new connections are still
  /// accepted for `accept_for` (a load balancer's deregistration delay), then the listeners
  /// close; run() returns once every connection has finished its request, or after `grace`.
  void drain(std::chrono::seconds accept_for, std::chrono::seconds grace);

  struct impl;  ///< the server's state (shared with its sessions; defined in the .cpp)

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace kvr
