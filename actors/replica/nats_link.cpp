#include "actors/replica/nats_link.hpp"

#include <pthread.h>

#include <stdexcept>

#include <fmt/format.h>
#include <nats/nats.h>

namespace kvr {
namespace {

void check(natsStatus status, std::string_view what) {
  if (status != NATS_OK) throw std::runtime_error(fmt::format("NATS: {}: {}", what, natsStatus_GetText(status)));
}

}  // namespace

nats_link::nats_link(nats_link_settings settings, std::string subscription, on_message message, on_state state)
    : settings_(std::move(settings)), message_(std::move(message)), state_(std::move(state)) {
  if (settings_.servers.empty()) throw std::runtime_error("NATS: no server given");
  std::vector<const char*> servers;
  for (const std::string& s : settings_.servers) servers.push_back(s.c_str());
  try {
    check(natsOptions_Create(&options_), "options");
    check(natsOptions_SetServers(options_, servers.data(), static_cast<int>(servers.size())), "servers");
    if (!settings_.name.empty()) check(natsOptions_SetName(options_, settings_.name.c_str()), "name");
    check(natsOptions_SetNoEcho(options_, true), "no echo");  // a replica's own messages are not for it
    check(natsOptions_SetMaxReconnect(options_, -1), "reconnects");
    check(natsOptions_SetReconnectWait(options_, settings_.reconnect_wait.count()), "reconnect wait");
    // Nothing is published while disconnected (publish() checks first: a snapshot after the
    // reconnection says what is true then); this bounds what a publish racing the loss buffers.
    check(natsOptions_SetReconnectBufSize(options_, 1 << 20), "reconnect buffer");
    // The caller batches already (actors/replica/peer_publisher): a publish goes out at once from
    // its thread instead of waking the client's flusher thread for each message.
    check(natsOptions_SetSendAsap(options_, true), "send asap");
    check(natsOptions_SetPingInterval(options_, 1000), "ping interval");
    check(natsOptions_SetMaxPingsOut(options_, 2), "pings out");
    check(natsOptions_SetDisconnectedCB(options_, &nats_link::disconnected_cb, this), "disconnected callback");
    check(natsOptions_SetReconnectedCB(options_, &nats_link::connected_cb, this), "reconnected callback");
    check(natsOptions_SetRetryOnFailedConnect(options_, true, &nats_link::connected_cb, this), "retry");
    const natsStatus connected = natsConnection_Connect(&connection_, options_);
    if (connected != NATS_OK && connected != NATS_NOT_YET_CONNECTED) check(connected, "connect");
    check(natsConnection_Subscribe(&subscription_, connection_, subscription.c_str(), &nats_link::message_cb, this),
          fmt::format("subscribe to {}", subscription));
    check(natsSubscription_SetPendingLimits(subscription_, settings_.pending_messages, 64 << 20), "pending limits");
    if (connected == NATS_OK) set_connected(true);
  } catch (...) {
    release();
    throw;
  }
}

nats_link::~nats_link() { release(); }

void nats_link::release() {
  if (subscription_ != nullptr) {
    natsSubscription_Unsubscribe(subscription_);
    natsSubscription_Destroy(subscription_);
    subscription_ = nullptr;
  }
  if (connection_ != nullptr) {
    natsConnection_Close(connection_);
    natsConnection_Destroy(connection_);
    connection_ = nullptr;
  }
  if (options_ != nullptr) {
    natsOptions_Destroy(options_);
    options_ = nullptr;
  }
}

bool nats_link::publish(const std::string& subject, std::span<const std::uint8_t> data) {
  if (!connected()) return false;
  return natsConnection_Publish(connection_, subject.c_str(), data.data(), static_cast<int>(data.size())) == NATS_OK;
}

void nats_link::set_connected(bool up) {
  if (connected_.exchange(up) != up && state_) state_(up);
}

void nats_link::connected_cb(natsConnection*, void* self) { static_cast<nats_link*>(self)->set_connected(true); }

void nats_link::disconnected_cb(natsConnection*, void* self) { static_cast<nats_link*>(self)->set_connected(false); }

void nats_link::message_cb(natsConnection*, natsSubscription*, natsMsg* message, void* self) {
  thread_local bool named = false;  // the client's delivery thread, named for `top -H`
  if (!named) named = pthread_setname_np(pthread_self(), "kvr-nats-in") == 0 || true;
  auto* link = static_cast<nats_link*>(self);
  const auto* data = reinterpret_cast<const std::uint8_t*>(natsMsg_GetData(message));
  link->message_(natsMsg_GetSubject(message), std::span(data, static_cast<std::size_t>(natsMsg_GetDataLength(message))));
  natsMsg_Destroy(message);
}

}  // namespace kvr
