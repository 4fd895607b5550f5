#include "app/mocker/bootstrap_rooms.hpp"

#include <utility>

namespace kvr::mocker {

void bootstrap_rooms::prefilled(std::uint64_t room, blocks hashes, sent_handler sent) {
  std::unique_lock lock(mutex_);
  room_state& state = rooms_[room];
  if (!state.ready) {  // the decode side has not asked yet
    sent_handler displaced = std::exchange(state.sent, std::move(sent));  // a room used twice: the first loses
    state.hashes = std::move(hashes);
    lock.unlock();
    if (displaced) displaced(false);
    return;
  }
  ready_handler ready = std::move(state.ready);
  rooms_.erase(room);
  lock.unlock();
  ready(std::move(hashes));
  sent(true);
}

void bootstrap_rooms::fetch(std::uint64_t room, ready_handler ready) {
  std::unique_lock lock(mutex_);
  room_state& state = rooms_[room];
  if (!state.hashes) {  // the prefill is not done yet (or not even started)
    state.ready = std::move(ready);
    return;
  }
  blocks hashes = std::move(*state.hashes);
  sent_handler sent = std::move(state.sent);
  rooms_.erase(room);
  lock.unlock();
  ready(std::move(hashes));
  sent(true);
}

void bootstrap_rooms::give_up_prefill(std::uint64_t room) {
  std::unique_lock lock(mutex_);
  const auto it = rooms_.find(room);
  if (it == rooms_.end() || !it->second.sent) return;  // taken meanwhile
  sent_handler sent = std::move(it->second.sent);
  rooms_.erase(it);
  lock.unlock();
  sent(false);
}

void bootstrap_rooms::give_up_fetch(std::uint64_t room) {
  std::unique_lock lock(mutex_);
  const auto it = rooms_.find(room);
  if (it == rooms_.end() || !it->second.ready) return;  // served meanwhile
  ready_handler ready = std::move(it->second.ready);
  rooms_.erase(it);
  lock.unlock();
  ready(std::nullopt);
}

std::size_t bootstrap_rooms::open() {
  std::lock_guard lock(mutex_);
  return rooms_.size();
}

}  // namespace kvr::mocker
