#pragma once
/// Publishes one engine rank's KV events as vLLM and SGLang do (docs/kv-events.md): a PUB socket
/// sending [topic, seq (8 bytes big-endian), payload], and a ROUTER socket answering replay
/// requests from a buffer of the last `buffer_steps` batches. Endpoints with `*` or `::` bind,
/// others connect (vLLM's rule). A thread owns both sockets; `publish` only queues.
///
/// Fault injection: `drop_pct` of batches are not sent live (as a full high-water mark drops
/// them) but stay in the replay buffer, so subscribers see gaps they can fill. `restart()`
/// starts the sequence at 0 again with an empty buffer, as a restarted engine does.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/kv/kv_encode.hpp"

namespace kvr::mocker {

struct publisher_settings {
  std::string endpoint;         ///< e.g. tcp://*:5557
  std::string replay_endpoint;  ///< empty: no replay socket
  std::string topic;
  kv_encode_options encoding;
  double drop_pct = 0;
  std::uint64_t seed = 1;       ///< the drop decisions' generator
  std::size_t buffer_steps = 10000;
  std::optional<std::int64_t> dp_rank;
};

struct publisher_counters {
  std::atomic<std::uint64_t> batches{0};  ///< sequence numbers used
  std::atomic<std::uint64_t> dropped{0};  ///< not sent live (fault injection)
  std::atomic<std::uint64_t> replays{0};  ///< replay requests answered
};

class event_publisher {
 public:
  /// Throws std::runtime_error if a socket cannot bind or connect.
  explicit event_publisher(publisher_settings settings);
  ~event_publisher();
  event_publisher(const event_publisher&) = delete;
  event_publisher& operator=(const event_publisher&) = delete;

  void publish(std::vector<kv_event> events, double timestamp);
  void restart();
  /// Changes the share of batches dropped from now on (fault injection at run time).
  void set_drop_pct(double pct) { drop_pct_ = pct; }
  [[nodiscard]] const publisher_counters& counters() const { return counters_; }

 private:
  void run();

  publisher_settings settings_;
  publisher_counters counters_;
  std::atomic<double> drop_pct_;
  std::mutex mutex_;
  /// Batches to send, each with its drop decision, made when the batch is published, so that
  /// `set_drop_pct` applies from the next batch on, whenever the thread gets to it.
  std::deque<std::pair<kv_batch, bool>> queue_;
  std::uint64_t drop_state_;  ///< the drop decisions' generator (splitmix64), under mutex_
  bool restart_requested_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::string startup_error_;
  std::mutex startup_mutex_;
  std::condition_variable started_;
  bool startup_done_ = false;
};

}  // namespace kvr::mocker
