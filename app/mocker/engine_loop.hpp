#pragma once
/// Runs one simulated engine rank in real time: a thread steps the core engine, sleeps for the
/// step's modelled duration, then hands each sequence's tokens to its sink and publishes the
/// step's KV events. Sinks run on this thread: they must only post work elsewhere.

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "app/mocker/event_publisher.hpp"
#include "core/mocker/engine.hpp"

namespace kvr::mocker {

using output_sink = std::function<void(const sequence_output&)>;

/// What /metrics shows of a rank.
struct rank_snapshot {
  std::size_t running = 0;
  std::size_t waiting = 0;
  double kv_usage = 0;
  std::size_t cached_blocks = 0;
  engine_counters counters;
  std::uint64_t event_batches = 0;   ///< KV-event batches published (sequence numbers used)
  std::uint64_t dropped_batches = 0; ///< of which not sent live
  std::uint32_t block_size = 16;     ///< as vllm:cache_config_info tells them
  std::uint32_t num_blocks = 0;
};

class engine_loop {
 public:
  /// `publisher` may be null (KV events off).
  engine_loop(engine_settings settings, std::unique_ptr<event_publisher> publisher);
  ~engine_loop();
  engine_loop(const engine_loop&) = delete;
  engine_loop& operator=(const engine_loop&) = delete;

  void submit(sequence_request request, output_sink sink);
  void abort(std::uint64_t id);
  /// Ends every request with an error, empties the cache and restarts the event sequence.
  void restart();

  /// Fault injection at run time: the share of KV-event batches not sent live.
  void set_drop_pct(double pct);

  [[nodiscard]] rank_snapshot snapshot() const;
  /// The true cache contents: engine and router hashes of every cached block.
  [[nodiscard]] nlohmann::json dump() const;
  /// Requests queued or running (for picking the least loaded rank).
  [[nodiscard]] std::size_t load() const;

 private:
  void run();

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  engine engine_;
  std::unordered_map<std::uint64_t, output_sink> sinks_;
  std::unique_ptr<event_publisher> publisher_;
  bool stop_ = false;
  std::uint64_t restarts_ = 0;  ///< a step computed before a restart publishes nothing after it
  std::thread thread_;
};

}  // namespace kvr::mocker
