#include "actors/http/access_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kvr {
namespace {

std::string utc_time(std::chrono::system_clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec, ms % 1000);
}

/// Writes all of `data`, retrying on EINTR and short writes; false on another error.
bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

std::string to_json_line(const access_record& r) {
  auto rounded = [](double ms) { return std::round(ms * 1000.0) / 1000.0; };
  nlohmann::json line{{"time", utc_time(r.received)},
                      {"request_id", r.request_id},
                      {"model", r.model},
                      {"set", r.set},
                      {"worker", r.worker.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.worker)},
                      {"status", r.status},
                      {"outcome", r.outcome},
                      {"prompt_tokens", r.prompt_tokens},
                      {"overlap_blocks", r.overlap_blocks},
                      {"attempts", r.attempts},
                      {"migrations", r.migrations},
                      {"queue_wait_ms", rounded(r.queue_wait_ms)},
                      {"ttft_ms", r.ttft_ms < 0 ? nlohmann::json(nullptr) : nlohmann::json(rounded(r.ttft_ms))},
                      {"duration_ms", rounded(r.duration_ms)},
                      {"bytes", r.bytes}};
  // Names come from the client (model, request id): never let bad UTF-8 throw.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

access_log::access_log(const std::string& path, std::size_t max_buffered) : max_buffered_(max_buffered) {
  if (path == "-") {
    fd_ = STDOUT_FILENO;
  } else {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) throw std::runtime_error(fmt::format("cannot open the access log {}: {}", path, std::strerror(errno)));
    owns_fd_ = true;
  }
  writer_ = std::thread([this] { run(); });
}

access_log::~access_log() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  writer_.join();
  if (owns_fd_) ::close(fd_);
}

void access_log::write(const access_record& record) {
  std::string line = to_json_line(record);
  line += '\n';
  {
    std::lock_guard lock(mutex_);
    if (pending_.size() + line.size() > max_buffered_) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    const bool was_empty = pending_.empty();
    pending_ += line;
    if (!was_empty) return;  // the writer is already awake for what is pending
  }
  wake_.notify_one();
}

void access_log::run() {
  std::string batch;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
      if (pending_.empty() && stopping_) return;
      batch.swap(pending_);
    }
    std::uint64_t lines = 0;
    for (char c : batch) lines += c == '\n';
    if (write_all(fd_, batch)) written_.fetch_add(lines, std::memory_order_relaxed);
    else dropped_.fetch_add(lines, std::memory_order_relaxed);
    batch.clear();
  }
}

}  // namespace kvr
