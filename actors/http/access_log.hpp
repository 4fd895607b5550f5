#pragma once
/// `--access-log PATH|-`: one JSON line per routed request (where it went, how long it took),
/// written by a thread of its own so a slow disk or a slow reader of stdout never stalls an I/O
/// thread. The I/O threads hand lines over under a mutex; past `max_buffered` bytes waiting,
/// lines are dropped and counted (`kvrouter_access_log_dropped_total`), never queued without
/// bound.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace kvr {

/// What one routed request did, as the access log records it.
struct access_record {
  std::chrono::system_clock::time_point received;  ///< when its last byte arrived
  std::string_view request_id;
  std::string_view model;
  std::string_view set;
  std::string_view worker;            ///< "" when no worker answered
  std::uint32_t prompt_tokens = 0;    ///< exact once tokenized, else the estimate
  std::uint32_t overlap_blocks = 0;
  std::uint32_t attempts = 0;         ///< workers tried (retries + 1); 0 = none
  std::uint32_t migrations = 0;       ///< continuations on another worker after a stream broke off
  double queue_wait_ms = 0;           ///< in the set's queue
  double ttft_ms = -1;                ///< to the worker's first bytes; -1 = none came
  double duration_ms = 0;             ///< to the end of the answer
  unsigned status = 0;                ///< as the client got it; 0 = it left before any answer
  std::uint64_t bytes = 0;            ///< answer body bytes sent to the client
  std::string_view outcome;           ///< completed, client_left, cut, timed_out, router_error, dry_run
};

/// `{"time": "2026-12-01T15:04:05.123Z", "request_id": ..., "model": ..., ...}` (no newline).
[[nodiscard]] std::string to_json_line(const access_record& record);

class access_log {
 public:
  /// `path` "-" writes to stdout; otherwise the file is opened for appending (throws if it
  /// cannot be).
  explicit access_log(const std::string& path, std::size_t max_buffered = 4u << 20);
  ~access_log();
  access_log(const access_log&) = delete;
  access_log& operator=(const access_log&) = delete;

  /// Hands one record to the writer (any thread).
  void write(const access_record& record);
  [[nodiscard]] std::uint64_t written() const { return written_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  void run();

  int fd_ = -1;
  bool owns_fd_ = false;
  std::size_t max_buffered_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string pending_;
  bool stopping_ = false;
  std::atomic<std::uint64_t> written_{0}, dropped_{0};
  std::thread writer_;
};

}  // namespace kvr
