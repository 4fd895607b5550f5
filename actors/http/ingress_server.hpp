#pragma once
/// Ingress internals shared by the server (actors/http/http_ingress.cpp: threads, listeners, the
/// routing table, /metrics) and its connections (actors/http/ingress_session.cpp). Not part of the
/// ingress's interface: include actors/http/http_ingress.hpp instead.

#include <utility>  // before Asio under g++ 12

#include <array>
#include <atomic>
#include <chrono>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "actors/http/access_log.hpp"
#include "actors/http/api_key_guard.hpp"
#include "actors/http/http_ingress.hpp"
#include "actors/http/ingress_probe.hpp"
#include "actors/http/http_read_limits.hpp"
#include "actors/http/local_routing.hpp"
#include "actors/http/status_page.hpp"
#include "core/prompt/openai.hpp"

namespace kvr {
namespace ingress {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using clock_type = std::chrono::steady_clock;

/// A keep-alive connection to a worker, pooled per I/O thread between requests: a plain socket,
/// or TLS over one for an https:// worker.
struct upstream_connection {
  explicit upstream_connection(asio::io_context& io) : plain(std::in_place, io) {}
  upstream_connection(asio::io_context& io, asio::ssl::context& tls) : secure(std::in_place, io, tls) {}
  std::optional<tcp::socket> plain;
  std::optional<asio::ssl::stream<tcp::socket>> secure;
  boost::beast::flat_buffer buffer = bounded_http_read_buffer();

  /// The TCP socket under either kind (closing it cuts whatever operation is pending).
  tcp::socket& socket() { return secure ? secure->next_layer() : *plain; }
  /// Runs `operation` on the stream the HTTP bytes go through.
  template <class Operation>
  void on_stream(Operation&& operation) {
    if (secure) operation(*secure);
    else operation(*plain);
  }
};

/// Something on an I/O thread with a deadline (a client connection). Per-operation Asio timers
/// cost a timer-queue update per socket call; instead each thread sweeps its connections a few
/// times a second and tells those past their deadline.
class timed {
 public:
  virtual ~timed() = default;
  /// The deadline passed: give up on whatever the connection waits for.
  virtual void on_deadline() = 0;
  /// The server drains: a connection between requests closes, one with a request answers it
  /// and then closes.
  virtual void on_drain() = 0;
  clock_type::time_point deadline = clock_type::time_point::max();
};

/// What one I/O thread owns: its io_context, acceptor, idle upstream connections, JSON parser,
/// its connections' deadlines, and the routing it does itself.
struct io_thread {
  explicit io_thread(std::uint64_t seed)
      : local(seed), bootstrap_rooms((std::uint64_t{std::random_device{}()} << 32) | std::random_device{}()) {}

  /// Swept for deadlines: client connections and disaggregated requests' prefill legs. Declared
  /// before `io`: destroying `io` destroys the handlers that own the last of them, whose
  /// destructors leave this list.
  std::list<timed*> connections;
  asio::io_context io{1};
  std::optional<tcp::acceptor> acceptor;
  asio::steady_timer accept_backoff{io};  ///< after a failed accept (e.g. out of descriptors)
  std::unordered_map<std::string, std::vector<std::unique_ptr<upstream_connection>>> idle;  ///< by worker URL
  request_parser json;
  local_router local;
  /// SGLang's bootstrap rooms: seeded per process, so replicas sharing a prefill worker never
  /// hand out the same rooms.
  std::mt19937_64 bootstrap_rooms;
  lifecycle_reporter lifecycle;
  asio::steady_timer lifecycle_timer{io};
  asio::steady_timer sweep_timer{io};
  asio::steady_timer drain_timer{io};  ///< thread 0 only: the drain's delay, then its progress checks
  asio::steady_timer traffic_timer{io};  ///< thread 0 only: the status page's samples
  asio::steady_timer key_file_timer{io};  ///< thread 0 only: --api-key-file's change checks

  [[nodiscard]] std::unique_ptr<upstream_connection> take_idle(const std::string& url);
  void give_back(const std::string& url, std::unique_ptr<upstream_connection> connection);
  /// Reports a step of a request this thread routed itself. A worker failure goes out at once
  /// (with everything before it), so the scorer marks the worker before the retry's pick.
  void report(const scorer_actor& scorer, const lifecycle_event& event);
  /// Starts the periodic deadline sweep (every `period`).
  void sweep_every(std::chrono::milliseconds period);
};

}  // namespace ingress

struct http_ingress::impl {
  ingress_settings settings;
  ingress::ingress_probe probe;  ///< before `threads`: connections count themselves out when destroyed
  std::vector<std::unique_ptr<ingress::io_thread>> threads;
  std::mutex table_mutex;
  std::shared_ptr<const routing_table> table = std::make_shared<routing_table>();
  /// Resolved addresses of worker hosts, by "host:port" (resolved when a table is installed).
  std::map<std::string, std::vector<ingress::tcp::endpoint>> resolved;
  std::atomic<std::uint64_t> next_request_id{1};
  /// Random per process: generated request ids (`kvr-TAG-N`) do not repeat across restarts.
  std::uint64_t instance_tag = 0;
  std::function<void(std::string, std::string)> inject_fault;  ///< set before serving
  std::function<void(std::string&)> write_more_metrics;       ///< set before serving
  std::function<std::optional<std::string>(const routing_table&)> not_ready;  ///< set before serving (may be empty)
  std::function<std::string()> replication_status;            ///< set before serving (may be empty)
  std::uint16_t bound_port = 0;
  /// Set once by drain(): /ready answers 503, answers carry `Connection: close`.
  std::atomic<bool> draining{false};
  std::unique_ptr<access_log> access;  ///< --access-log; null when off
  const ingress::clock_type::time_point started = ingress::clock_type::now();
  traffic_recorder traffic;  ///< the status page's history, sampled on thread 0
  std::unique_ptr<api_key_guard> keys;  ///< made at start-up (it reads --api-key-file)
  /// Trust for https:// workers (system CAs + --worker-ca-file); made at start-up.
  std::shared_ptr<ingress::asio::ssl::context> worker_tls;

  std::shared_ptr<const routing_table> current_table() {
    std::lock_guard lock(table_mutex);
    return table;
  }
  std::vector<ingress::tcp::endpoint> endpoints_of(const worker_target& target) {
    std::lock_guard lock(table_mutex);
    auto it = resolved.find(target.host + ":" + target.port);
    return it == resolved.end() ? std::vector<ingress::tcp::endpoint>{} : it->second;
  }

  void accept(ingress::io_thread& thread);
  /// After the drain delay: closes the listeners, then stops once no connection is left or
  /// the grace period is over (on thread 0).
  void finish_drain(std::chrono::steady_clock::time_point give_up);
  void wait_for_drained(std::chrono::steady_clock::time_point give_up);
  /// Samples every set's traffic for the status page, every traffic_recorder::sample_period_seconds.
  void sample_traffic();
  /// Re-reads --api-key-file every second when it changed.
  void watch_key_file();
  [[nodiscard]] double uptime_seconds() const {
    return std::chrono::duration<double>(ingress::clock_type::now() - started).count();
  }
  std::string metrics_text();
};

namespace ingress {
/// Serves one accepted client connection until it closes (actors/http/ingress_session.cpp).
void serve_connection(http_ingress::impl& server, io_thread& thread, tcp::socket socket);
}  // namespace ingress

}  // namespace kvr
