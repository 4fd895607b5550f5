#pragma once
/// One connection to a NATS cluster (the C client, libnats), owned RAII-style: connects in the
/// background (a server that is down at start is retried, never fatal), reconnects by itself
/// forever, and reports its state changes. Publishing never blocks on the network: the socket
/// is non-blocking, what it does not take at once is sent by the link's thread when it can, and
/// while disconnected nothing is published (the caller counts it).
///
/// The socket is driven by the link's own thread through libnats' external event loop
/// interface (an epoll set), and the subscription is a synchronous one drained on that thread:
/// a message is read, parsed and handed to `on_message` by one thread, where the client's own
/// threads would take two (its reader, then a delivery thread, each a wake-up: the dearest part
/// of a small message on a virtual machine, docs/benchmarks.md "Router replicas").

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

struct __natsConnection;
struct __natsOptions;
struct __natsSubscription;
struct __natsMsg;

namespace kvr {

struct nats_link_settings {
  std::vector<std::string> servers;  ///< nats://host:port, tried in order
  std::string name;                  ///< shown by the server (`nats-server` monitoring)
  std::chrono::milliseconds reconnect_wait{250};
  /// The subscription's backlog bound (messages); beyond it the client drops and says so.
  int pending_messages = 65536;
};

class nats_link {
 public:
  /// Called on the link's thread, one message at a time, in arrival order.
  using on_message = std::function<void(std::string_view subject, std::span<const std::uint8_t> data)>;
  /// `connected` true on (re)connection, false when the connection is lost.
  using on_state = std::function<void(bool connected)>;

  /// Starts connecting; throws std::runtime_error naming the problem when the settings are
  /// unusable (a malformed URL). A server that is unreachable is not an error: it is retried.
  nats_link(nats_link_settings settings, std::string subscription, on_message message, on_state state);
  ~nats_link();
  nats_link(const nats_link&) = delete;
  nats_link& operator=(const nats_link&) = delete;

  /// Queues `data` on `subject` and sends it from the calling thread as far as the socket takes
  /// it without waiting; false when not connected or the client refused it.
  bool publish(const std::string& subject, std::span<const std::uint8_t> data);
  [[nodiscard]] bool connected() const { return connected_.load(std::memory_order_relaxed); }
  /// Messages the client dropped because the subscription's backlog was full (slow consumer).
  [[nodiscard]] std::uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  friend struct nats_event_loop;  ///< libnats' callbacks (nats_link.cpp), which call the four below
  // What libnats asks of its event loop: called from any of its threads, under the connection's lock.
  void on_attach(__natsConnection* connection, int socket);
  void on_read_interest(bool add);
  void on_write_interest(bool add);
  void on_detach();

  /// Makes the epoll registration of the socket match what libnats asked for (under poll_mutex_).
  void apply_interest();
  void run();      ///< the link's thread: waits on the socket, reads, writes, delivers
  void deliver();  ///< hands every message the last read completed to `message_`
  void free_retired();
  void send_buffered(__natsConnection* connection);  ///< from any thread; never waits on the socket
  void set_connected(bool up);
  void release();

  nats_link_settings settings_;
  on_message message_;
  on_state state_;
  __natsOptions* options_ = nullptr;
  __natsConnection* connection_ = nullptr;
  std::atomic<__natsSubscription*> subscription_{nullptr};
  std::atomic<__natsConnection*> attached_{nullptr};  ///< what the loop reads and writes for
  std::atomic<bool> connected_{false};
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<bool> closing_{false};
  std::mutex closed_mutex_;
  std::condition_variable closed_signal_;
  bool closed_ = false;  ///< libnats made its last callback for the connection

  int epoll_ = -1;
  int wake_ = -1;  ///< an eventfd: tells the thread to stop
  std::mutex write_mutex_;  ///< one ProcessWriteEvent at a time (see send_buffered)
  std::mutex poll_mutex_;
  int socket_ = -1;
  bool read_wanted_ = false;
  bool write_wanted_ = false;
  std::uint32_t registered_ = 0;  ///< the epoll events the socket is registered for; 0 = none
  std::atomic<bool> stopping_{false};
  /// Messages delivered, freed in groups: libnats hands each freed message to its collector
  /// thread, waking it when its list was empty, so freeing one at a time costs a wake-up each.
  std::vector<__natsMsg*> retired_;
  std::size_t retired_bytes_ = 0;
  std::thread thread_;
};

}  // namespace kvr
