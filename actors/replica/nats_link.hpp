#pragma once
/// One connection to a NATS cluster (the C client, libnats), owned RAII-style: connects in the
/// background (a server that is down at start is retried, never fatal), reconnects by itself
/// forever, and reports its state changes. Publishing never blocks on the network: the client
/// buffers, and while disconnected nothing is published (the caller counts it). Messages of the
/// subscription arrive on the client's own delivery thread.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
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
  using on_message = std::function<void(std::string_view subject, std::span<const std::uint8_t> data)>;
  /// `connected` true on (re)connection, false when the connection is lost.
  using on_state = std::function<void(bool connected)>;

  /// Starts connecting; throws std::runtime_error naming the problem when the settings are
  /// unusable (a malformed URL). A server that is unreachable is not an error: it is retried.
  nats_link(nats_link_settings settings, std::string subscription, on_message message, on_state state);
  ~nats_link();
  nats_link(const nats_link&) = delete;
  nats_link& operator=(const nats_link&) = delete;

  /// Queues `data` on `subject`; false when not connected or the client refused it.
  bool publish(const std::string& subject, std::span<const std::uint8_t> data);
  [[nodiscard]] bool connected() const { return connected_.load(std::memory_order_relaxed); }

 private:
  static void connected_cb(__natsConnection*, void* self);
  static void disconnected_cb(__natsConnection*, void* self);
  static void message_cb(__natsConnection*, __natsSubscription*, __natsMsg* message, void* self);
  void set_connected(bool up);
  void release();

  nats_link_settings settings_;
  on_message message_;
  on_state state_;
  __natsOptions* options_ = nullptr;
  __natsConnection* connection_ = nullptr;
  __natsSubscription* subscription_ = nullptr;
  std::atomic<bool> connected_{false};
};

}  // namespace kvr
