#pragma once
/// What the HTTP ingress counts for /metrics, shared by every I/O thread: one method per thing
/// that happens, so the request path says what happened and never how it is counted.

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/migration/continuation.hpp"

namespace kvr::ingress {

/// A latency histogram in seconds (Prometheus buckets 5 ms .. 10 s), filled from any thread.
class seconds_histogram {
 public:
  void add(double seconds);
  /// The family `name` (HELP `help`) in Prometheus text format, appended to `out`.
  void write(std::string& out, std::string_view name, std::string_view help) const;

 private:
  static constexpr std::array<double, 10> buckets_{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10};
  std::array<std::atomic<std::uint64_t>, buckets_.size() + 1> counts_{};  ///< last = +Inf
  std::atomic<std::uint64_t> micros_{0};
};

class ingress_probe {
 public:
  void connection_opened() {
    bump(connections_);
    bump(open_connections_);
  }
  void connection_closed() { open_connections_.fetch_sub(1, std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t open_connections() const { return open_connections_.load(std::memory_order_relaxed); }
  /// A worker's answer started reaching the client (counted once per request, retries or not).
  void answer_started() {
    bump(proxied_);
    bump(proxied_in_flight_);
  }
  /// A migrated answer goes on from another worker: streaming again, not a new answer.
  void continuation_started() { proxied_in_flight_.fetch_add(1, std::memory_order_relaxed); }
  /// Once per answer_started() and per continuation_started().
  void answer_ended() { proxied_in_flight_.fetch_sub(1, std::memory_order_relaxed); }
  void retried() { bump(retries_); }
  void stale_connection_retried() { bump(stale_connection_retries_); }
  void upstream_failed() { bump(upstream_failures_); }
  void upstream_timed_out() { bump(upstream_timeouts_); }
  void client_disconnected() { bump(client_disconnects_); }
  void dry_run() { bump(dry_runs_); }
  void tokenized_locally() { bump(tokenized_locally_); }
  void prompt_routed_on_load() { bump(prompts_routed_on_load_); }
  void overloaded() { bump(overloaded_); }
  /// How a disaggregated set's request ran (docs/disaggregation.md).
  enum class pd_path : std::uint8_t { disaggregated, local, aggregated_fallback, count };
  void pd_ran(pd_path path) { bump(pd_paths_[static_cast<std::size_t>(path)]); }
  void pd_missing_params() { bump(pd_missing_params_); }
  void pd_prefill_failed() { bump(pd_prefill_failures_); }
  void pd_prefill_timed_out() { bump(pd_prefill_timeouts_); }
  void pd_prefill_error_status() { bump(pd_prefill_error_statuses_); }
  /// A prefill leg's time from sending to its whole answer.
  void pd_prefill_took(double seconds) { pd_prefill_seconds_.add(seconds); }
  /// A decode leg's time from sending to its first answer bytes (its TTFT), and to its end.
  void pd_decode_first_bytes_after(double seconds) { pd_decode_first_byte_seconds_.add(seconds); }
  void pd_decode_took(double seconds) { pd_decode_seconds_.add(seconds); }
  void responded(unsigned status) { bump(responses_by_class_[std::min(status / 100, 5u)]); }
  /// A stream whose worker failed mid-way could not be continued elsewhere (docs/migration.md).
  void migration_refused(migration_refusal why) { bump(migration_refusals_[static_cast<std::size_t>(why)]); }

  /// The ingress's families in Prometheus text format, appended to `out`.
  void write_metrics(std::string& out) const;

 private:
  static void bump(std::atomic<std::uint64_t>& counter) { counter.fetch_add(1, std::memory_order_relaxed); }

  std::atomic<std::uint64_t> tokenized_locally_{0};
  std::atomic<std::uint64_t> prompts_routed_on_load_{0};
  std::atomic<std::uint64_t> connections_{0};
  std::atomic<std::uint64_t> open_connections_{0};
  std::atomic<std::uint64_t> proxied_{0};
  std::atomic<std::uint64_t> proxied_in_flight_{0};
  std::atomic<std::uint64_t> retries_{0};
  std::atomic<std::uint64_t> stale_connection_retries_{0};
  std::atomic<std::uint64_t> upstream_failures_{0};
  std::atomic<std::uint64_t> upstream_timeouts_{0};
  std::atomic<std::uint64_t> client_disconnects_{0};
  std::atomic<std::uint64_t> dry_runs_{0};
  std::atomic<std::uint64_t> overloaded_{0};
  std::array<std::atomic<std::uint64_t>, 6> responses_by_class_{};  ///< index = status / 100
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(migration_refusal::count)> migration_refusals_{};
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(pd_path::count)> pd_paths_{};
  std::atomic<std::uint64_t> pd_missing_params_{0};
  std::atomic<std::uint64_t> pd_prefill_failures_{0};
  std::atomic<std::uint64_t> pd_prefill_timeouts_{0};
  std::atomic<std::uint64_t> pd_prefill_error_statuses_{0};
  seconds_histogram pd_prefill_seconds_;
  seconds_histogram pd_decode_first_byte_seconds_;
  seconds_histogram pd_decode_seconds_;
};

}  // namespace kvr::ingress
