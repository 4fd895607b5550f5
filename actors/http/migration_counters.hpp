#pragma once
/// A worker set's migrations, counted for /metrics (`kvrouter_migrations_total{set,model,reason}`
/// and the tokens each continuation carried over), shared by every I/O thread.

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvr::ingress {

class migration_counters {
 public:
  /// What broke the stream a continuation picked up.
  enum class cause : std::uint8_t {
    broken,         ///< the worker's connection was reset or closed mid-answer
    timed_out,      ///< the worker sent nothing within the upstream timeout
    error_event,    ///< the engine sent an error event
    worker_failed,  ///< a continuing worker failed before its first byte (refused, reset, a status)
    count,
  };
  [[nodiscard]] static std::string_view name(cause c);

  /// `ids_from_text`: the engine reported no token ids; kvrouter rebuilt them from the text.
  void started(cause why, std::uint32_t carried_tokens, bool ids_from_text);
  /// The families' HELP and TYPE lines; each set's samples follow (families stay grouped).
  static void write_started_help(std::string& out);
  void write_started(std::string& out, std::string_view set, std::string_view model) const;
  static void write_carried_help(std::string& out);
  void write_carried(std::string& out, std::string_view set, std::string_view model) const;
  static void write_from_text_help(std::string& out);
  void write_from_text(std::string& out, std::string_view set, std::string_view model) const;

 private:
  static constexpr std::array<std::uint32_t, 8> carried_buckets_{16, 64, 256, 1024, 4096, 16384, 65536, 262144};
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(cause::count)> started_{};
  std::array<std::atomic<std::uint64_t>, carried_buckets_.size() + 1> carried_{};  ///< last = +Inf
  std::atomic<std::uint64_t> carried_sum_{0};
  std::atomic<std::uint64_t> from_text_{0};
};

}  // namespace kvr::ingress
