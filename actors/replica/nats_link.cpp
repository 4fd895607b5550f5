#include "actors/replica/nats_link.hpp"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>
#include <nats/nats.h>

namespace kvr {
namespace {

void check(natsStatus status, std::string_view what) {
  if (status != NATS_OK) throw std::runtime_error(fmt::format("NATS: {}: {}", what, natsStatus_GetText(status)));
}

/// The link whose publish() is sending on this thread: its write requests are met by that
/// call's own flush, not by waking the link's thread.
thread_local const nats_link* flushing_here = nullptr;

/// Delivered messages are freed this many (or this many bytes) at a time.
constexpr std::size_t retired_batch = 64;
constexpr std::size_t retired_batch_bytes = std::size_t{1} << 20;

}  // namespace

/// libnats' event-loop callbacks, in its C signatures; `loop` and `user_data` are the link.
struct nats_event_loop {
  static natsStatus attach(void** user_data, void* loop, natsConnection* connection, natsSock socket) {
    *user_data = loop;
    static_cast<nats_link*>(loop)->on_attach(connection, socket);
    return NATS_OK;
  }
  static natsStatus read(void* user_data, bool add) {
    static_cast<nats_link*>(user_data)->on_read_interest(add);
    return NATS_OK;
  }
  static natsStatus write(void* user_data, bool add) {
    static_cast<nats_link*>(user_data)->on_write_interest(add);
    return NATS_OK;
  }
  static natsStatus detach(void* user_data) {
    static_cast<nats_link*>(user_data)->on_detach();
    return NATS_OK;
  }
  static void connected(natsConnection*, void* self) { static_cast<nats_link*>(self)->set_connected(true); }
  static void disconnected(natsConnection*, void* self) { static_cast<nats_link*>(self)->set_connected(false); }
  /// The last callback libnats makes for a connection (they come in order on its one callback
  /// thread): once it ran, none will touch the link again.
  static void closed(natsConnection*, void* self) {
    auto* link = static_cast<nats_link*>(self);
    std::lock_guard lock(link->closed_mutex_);
    link->closed_ = true;
    link->closed_signal_.notify_all();
  }
};

nats_link::nats_link(nats_link_settings settings, std::string subscription, on_message message, on_state state)
    : settings_(std::move(settings)), message_(std::move(message)), state_(std::move(state)) {
  if (settings_.servers.empty()) throw std::runtime_error("NATS: no server given");
  std::vector<const char*> servers;
  for (const std::string& s : settings_.servers) servers.push_back(s.c_str());
  try {
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
    wake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (epoll_ < 0 || wake_ < 0) throw std::runtime_error(fmt::format("NATS: epoll: {}", std::strerror(errno)));
    epoll_event wake_event{.events = EPOLLIN, .data = {.fd = wake_}};
    if (epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &wake_event) != 0)
      throw std::runtime_error(fmt::format("NATS: epoll: {}", std::strerror(errno)));
    thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "kvr-nats");
      retired_.reserve(retired_batch);
      run();
    });

    check(natsOptions_Create(&options_), "options");
    check(natsOptions_SetServers(options_, servers.data(), static_cast<int>(servers.size())), "servers");
    if (!settings_.name.empty()) check(natsOptions_SetName(options_, settings_.name.c_str()), "name");
    check(natsOptions_SetNoEcho(options_, true), "no echo");  // a replica's own messages are not for it
    check(natsOptions_SetMaxReconnect(options_, -1), "reconnects");
    check(natsOptions_SetReconnectWait(options_, settings_.reconnect_wait.count()), "reconnect wait");
    // Nothing is published while disconnected (publish() checks first: a snapshot after the
    // reconnection says what is true then); this bounds what a publish racing the loss buffers.
    check(natsOptions_SetReconnectBufSize(options_, 1 << 20), "reconnect buffer");
    // Every write is asked of the event loop at once (no flusher thread to wake); publish()
    // meets its own requests on the calling thread.
    check(natsOptions_SetSendAsap(options_, true), "send asap");
    check(natsOptions_SetEventLoop(options_, this, &nats_event_loop::attach, &nats_event_loop::read,
                                   &nats_event_loop::write, &nats_event_loop::detach),
          "event loop");
    check(natsOptions_SetPingInterval(options_, 1000), "ping interval");
    check(natsOptions_SetMaxPingsOut(options_, 2), "pings out");
    check(natsOptions_SetDisconnectedCB(options_, &nats_event_loop::disconnected, this), "disconnected callback");
    check(natsOptions_SetReconnectedCB(options_, &nats_event_loop::connected, this), "reconnected callback");
    check(natsOptions_SetClosedCB(options_, &nats_event_loop::closed, this), "closed callback");
    check(natsOptions_SetRetryOnFailedConnect(options_, true, &nats_event_loop::connected, this), "retry");
    const natsStatus connected = natsConnection_Connect(&connection_, options_);
    if (connected != NATS_OK && connected != NATS_NOT_YET_CONNECTED) check(connected, "connect");
    natsSubscription* sub = nullptr;
    check(natsConnection_SubscribeSync(&sub, connection_, subscription.c_str()), fmt::format("subscribe to {}", subscription));
    check(natsSubscription_SetPendingLimits(sub, settings_.pending_messages, 64 << 20), "pending limits");
    subscription_.store(sub);
    if (connected == NATS_OK) set_connected(true);
  } catch (...) {
    release();
    throw;
  }
}

nats_link::~nats_link() { release(); }

void nats_link::release() {
  // The thread first: from here on nothing calls into the connection but this.
  if (thread_.joinable()) {
    stopping_.store(true);
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto ignored = ::write(wake_, &one, sizeof one);
    thread_.join();
  }
  free_retired();
  if (natsSubscription* sub = subscription_.exchange(nullptr)) {
    natsSubscription_Unsubscribe(sub);
    natsSubscription_Destroy(sub);
  }
  if (connection_ != nullptr) {
    closing_.store(true);  // the disconnection Close makes is not news for the owner
    natsConnection_Close(connection_);
    // Its callbacks run on libnats' own thread, later: wait for the last before going away.
    std::unique_lock lock(closed_mutex_);
    closed_signal_.wait_for(lock, std::chrono::seconds(5), [&] { return closed_; });
    lock.unlock();
    natsConnection_Destroy(connection_);
    connection_ = nullptr;
  }
  if (options_ != nullptr) {
    natsOptions_Destroy(options_);
    options_ = nullptr;
  }
  if (wake_ >= 0) ::close(wake_);
  if (epoll_ >= 0) ::close(epoll_);
  wake_ = epoll_ = -1;
}

bool nats_link::publish(const std::string& subject, std::span<const std::uint8_t> data) {
  if (!connected()) return false;
  flushing_here = this;
  const natsStatus status = natsConnection_Publish(connection_, subject.c_str(), data.data(), static_cast<int>(data.size()));
  flushing_here = nullptr;
  if (status != NATS_OK) return false;
  // Sends what is buffered, without waiting; what the socket did not take, the thread sends
  // once it is writable.
  send_buffered(connection_);
  std::lock_guard lock(poll_mutex_);
  apply_interest();
  return true;
}

void nats_link::on_attach(natsConnection* connection, int socket) {
  std::lock_guard lock(poll_mutex_);
  if (socket_ >= 0 && registered_ != 0) epoll_ctl(epoll_, EPOLL_CTL_DEL, socket_, nullptr);  // a closed one is gone already
  socket_ = socket;
  registered_ = 0;
  read_wanted_ = true;
  write_wanted_ = false;
  attached_.store(connection);
  apply_interest();
}

void nats_link::on_read_interest(bool add) {
  std::lock_guard lock(poll_mutex_);
  read_wanted_ = add;
  apply_interest();
}

void nats_link::on_write_interest(bool add) {
  std::lock_guard lock(poll_mutex_);
  write_wanted_ = add;
  if (add && flushing_here == this) return;  // publish() flushes right after, on its own thread
  apply_interest();
}

void nats_link::on_detach() {
  std::lock_guard lock(poll_mutex_);
  if (socket_ >= 0 && registered_ != 0) epoll_ctl(epoll_, EPOLL_CTL_DEL, socket_, nullptr);
  socket_ = -1;
  registered_ = 0;
  attached_.store(nullptr);
}

void nats_link::apply_interest() {
  if (socket_ < 0) return;
  const std::uint32_t wanted = (read_wanted_ ? EPOLLIN : 0u) | (write_wanted_ ? EPOLLOUT : 0u);
  if (wanted == registered_) return;
  if (wanted == 0) {
    epoll_ctl(epoll_, EPOLL_CTL_DEL, socket_, nullptr);
  } else {
    epoll_event event{.events = wanted, .data = {.fd = socket_}};
    // The socket may have been closed and its number reused since it was registered: the
    // kernel forgot it then, and MOD fails where ADD is right (and the other way round).
    if (epoll_ctl(epoll_, registered_ == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, socket_, &event) != 0)
      epoll_ctl(epoll_, registered_ == 0 ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, socket_, &event);
  }
  registered_ = wanted;
}

void nats_link::run() {
  epoll_event events[4];
  while (!stopping_.load()) {
    const int ready = epoll_wait(epoll_, events, 4, -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int i = 0; i < ready; ++i) {
      if (events[i].data.fd == wake_) {
        std::uint64_t count = 0;
        [[maybe_unused]] const auto ignored = ::read(wake_, &count, sizeof count);
        continue;
      }
      natsConnection* connection = attached_.load();
      if (connection == nullptr) continue;
      // An error or hang-up is a read that fails: libnats then starts reconnecting.
      if ((events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0) {
        natsConnection_ProcessReadEvent(connection);
        deliver();
      }
      if ((events[i].events & EPOLLOUT) != 0) send_buffered(connection);
    }
  }
}

void nats_link::send_buffered(natsConnection* connection) {
  // libnats takes a write that sends nothing for a closed connection, so one writer at a time,
  // and only while something is buffered (the buffer grows meanwhile, never shrinks).
  std::lock_guard lock(write_mutex_);
  if (natsConnection_Buffered(connection) > 0) natsConnection_ProcessWriteEvent(connection);
}

void nats_link::deliver() {
  natsSubscription* sub = subscription_.load();
  if (sub == nullptr) return;
  // Only this thread reads the socket, so what is pending now can be taken without waiting.
  int pending = 0;
  if (natsSubscription_GetPending(sub, &pending, nullptr) != NATS_OK) return;
  while (pending > 0) {
    natsMsg* message = nullptr;
    const natsStatus status = natsSubscription_NextMsg(&message, sub, 1);
    if (status == NATS_SLOW_CONSUMER) {  // said once after the client dropped some; the rest is still there
      std::int64_t dropped = 0;
      if (natsSubscription_GetDropped(sub, &dropped) == NATS_OK) dropped_.store(static_cast<std::uint64_t>(dropped));
      continue;
    }
    if (status != NATS_OK) return;
    --pending;
    const auto* data = reinterpret_cast<const std::uint8_t*>(natsMsg_GetData(message));
    const auto size = static_cast<std::size_t>(natsMsg_GetDataLength(message));
    message_(natsMsg_GetSubject(message), std::span(data, size));
    retired_.push_back(message);
    retired_bytes_ += size;
    if (retired_.size() >= retired_batch || retired_bytes_ >= retired_batch_bytes) free_retired();
  }
}

void nats_link::free_retired() {
  for (natsMsg* message : retired_) natsMsg_Destroy(message);
  retired_.clear();
  retired_bytes_ = 0;
}

void nats_link::set_connected(bool up) {
  if (connected_.exchange(up) != up && state_ && !closing_.load()) state_(up);
}

}  // namespace kvr
