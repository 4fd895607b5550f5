#include "actors/replica/peer_inbox.hpp"

namespace kvr {

inbox_push peer_inbox::push(peer_message_ptr message, std::chrono::steady_clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (waiting_.size() >= capacity) return inbox_push::full;
  waiting_.push_back(std::move(message));
  if (woken_) return inbox_push::left;
  woken_ = queue_waiting_.load(std::memory_order_relaxed) ||
           now.time_since_epoch().count() >= wake_from_ns_.load(std::memory_order_relaxed);
  return woken_ ? inbox_push::left_wake_scorer : inbox_push::left;
}

std::vector<peer_message_ptr> peer_inbox::take() {
  std::vector<peer_message_ptr> out;
  std::lock_guard lock(mutex_);
  out.swap(waiting_);
  woken_ = false;
  return out;
}

}  // namespace kvr
