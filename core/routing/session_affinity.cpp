#include "core/routing/session_affinity.hpp"

#include <algorithm>

namespace kvr {

session_bindings::session_bindings(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 1)) {}

std::optional<std::uint32_t> session_bindings::find(std::uint64_t session, time_point now) {
  const auto it = entries_.find(session);
  if (it == entries_.end()) return std::nullopt;
  if (it->second.expires <= now) {
    recency_.erase(it->second.position);
    entries_.erase(it);
    return std::nullopt;
  }
  return it->second.worker;
}

void session_bindings::bind(std::uint64_t session, std::uint32_t worker, time_point expires) {
  if (auto it = entries_.find(session); it != entries_.end()) {
    if (it->second.worker != worker) ++moves_;
    it->second.worker = worker;
    it->second.expires = expires;
    recency_.splice(recency_.begin(), recency_, it->second.position);
    return;
  }
  if (entries_.size() >= capacity_) {
    entries_.erase(recency_.back());
    recency_.pop_back();
  }
  recency_.push_front(session);
  entries_.emplace(session, entry{worker, expires, recency_.begin()});
}

}  // namespace kvr
