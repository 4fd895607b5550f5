#pragma once
/// A worker set's admission queue: requests that found every routable worker busy wait here,
/// by priority class, then by arrival. Pure, with time passed in; the scorer owns one and asks
/// for its head whenever capacity may have freed (a first token, an end, fresh engine metrics).
///
/// Starvation: a request's class rises one step per `age_boost` it has waited, so a low
/// request queued behind a steady stream of normal ones is served once it has waited
/// 2 x `age_boost`. Within a class the oldest goes first, so each class's front is the only
/// candidate for the head, and finding the head costs three comparisons.

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <string_view>
#include <utility>

#include "core/common/latency_histogram.hpp"
#include "core/common/time.hpp"
#include "core/config/router_config.hpp"

namespace kvr {

/// `x-kvrouter-priority: high | normal | low`.
enum class request_priority : std::uint8_t { high, normal, low };
inline constexpr std::size_t priority_classes = 3;

[[nodiscard]] std::string_view to_string(request_priority priority);
/// The header's value (case-insensitive); anything else is nullopt (the request is refused).
[[nodiscard]] std::optional<request_priority> parse_priority(std::string_view text);
/// The class a request of `given` class is served in after waiting `waited`.
[[nodiscard]] request_priority effective_priority(request_priority given, duration waited, duration age_boost);

struct admission_settings {
  std::size_t capacity = 1024;
  duration timeout = std::chrono::seconds(60);
  duration age_boost = std::chrono::seconds(10);
};

/// What a set's queue has done, for /metrics and /v1/router/sets (its depth is published
/// live, apart from this).
struct admission_status {
  bool enabled = false;
  std::uint64_t admitted_after_wait = 0;  ///< left the queue for a worker (or a routing error)
  std::uint64_t rejected_full = 0;        ///< 429 queue_full
  std::uint64_t timed_out = 0;            ///< 503 queue_timeout
  std::uint64_t withdrawn = 0;            ///< their clients left while they waited
  latency_histogram wait;                 ///< waits of the requests that left the queue for a worker
};

/// The admission knobs of a router config, as the queue takes them.
[[nodiscard]] admission_settings admission_settings_of(const router_config& config);

template <class Payload>
class admission_queue {
 public:
  struct entry {
    std::uint64_t id = 0;
    request_priority priority = request_priority::normal;
    time_point arrival{};
    Payload payload;
  };

  explicit admission_queue(admission_settings settings) : settings_(settings) {}

  void retune(admission_settings settings) { settings_ = settings; }

  /// Queues a request; false (and nothing queued) when the queue is full.
  bool push(std::uint64_t id, request_priority priority, time_point now, Payload payload) {
    if (size_ >= settings_.capacity) return false;
    classes_[index(priority)].push_back({id, priority, now, std::move(payload)});
    ++size_;
    return true;
  }

  /// The request to serve next at `now`, or null when the queue is empty.
  [[nodiscard]] const entry* head(time_point now) const {
    const entry* best = nullptr;
    request_priority best_class = request_priority::low;
    for (const auto& fifo : classes_) {
      if (fifo.empty()) continue;
      const entry& front = fifo.front();
      const request_priority served_as = effective_priority(front.priority, now - front.arrival, settings_.age_boost);
      if (best == nullptr || served_as < best_class || (served_as == best_class && front.arrival < best->arrival)) {
        best = &front;
        best_class = served_as;
      }
    }
    return best;
  }

  /// Removes and returns `head(now)`; the queue must not be empty.
  entry pop_head(time_point now) {
    const entry* best = head(now);
    auto& fifo = classes_[index(best->priority)];
    entry taken = std::move(fifo.front());
    fifo.pop_front();
    --size_;
    return taken;
  }

  /// Takes out request `id` (its client left); nullopt when it is not queued.
  std::optional<Payload> remove(std::uint64_t id) {
    for (auto& fifo : classes_)
      for (auto it = fifo.begin(); it != fifo.end(); ++it)
        if (it->id == id) {
          Payload payload = std::move(it->payload);
          fifo.erase(it);
          --size_;
          return payload;
        }
    return std::nullopt;
  }

  /// Hands every request that has waited `timeout` or longer to `expired(entry&&)`, oldest first
  /// within each class.
  template <class OnExpired>
  void expire(time_point now, OnExpired&& expired) {
    for (auto& fifo : classes_)
      while (!fifo.empty() && now - fifo.front().arrival >= settings_.timeout) {
        entry out = std::move(fifo.front());
        fifo.pop_front();
        --size_;
        expired(std::move(out));
      }
  }

  /// When the oldest queued request times out; nullopt when the queue is empty.
  [[nodiscard]] std::optional<time_point> next_timeout() const {
    std::optional<time_point> first;
    for (const auto& fifo : classes_)
      if (!fifo.empty() && (!first || fifo.front().arrival < *first)) first = fifo.front().arrival;
    if (!first) return std::nullopt;
    return *first + settings_.timeout;
  }

  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }
  /// Queued requests of the class they came with.
  [[nodiscard]] std::size_t size(request_priority priority) const { return classes_[index(priority)].size(); }

 private:
  static std::size_t index(request_priority priority) { return static_cast<std::size_t>(priority); }

  admission_settings settings_;
  std::array<std::deque<entry>, priority_classes> classes_;
  std::size_t size_ = 0;
};

}  // namespace kvr
