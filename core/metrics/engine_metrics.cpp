#include "core/metrics/engine_metrics.hpp"

#include <charconv>
#include <cmath>
#include <limits>
#include <string>

namespace kvr {
namespace {

/// Sum and count of one gauge's finite samples over the engine's ranks.
struct gauge_total {
  double sum = 0.0;
  std::size_t series = 0;

  void add(double value) {
    if (!std::isfinite(value) || value < 0) return;  // NaN before the first step, or nonsense
    sum += value;
    ++series;
  }
  [[nodiscard]] std::optional<double> total() const { return series ? std::optional(sum) : std::nullopt; }
  [[nodiscard]] std::optional<double> mean() const { return series ? std::optional(sum / series) : std::nullopt; }
};

template <class Int>
std::optional<Int> label_integer(const prometheus_sample& sample, std::string_view name) {
  const std::string* text = sample.label(name);
  if (text == nullptr) return std::nullopt;
  Int value = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc{} || end != text->data() + text->size() || value == 0) return std::nullopt;
  return value;
}

std::optional<std::uint32_t> positive_count(double value) {
  if (!std::isfinite(value) || value < 1 || value > std::numeric_limits<std::uint32_t>::max()) return std::nullopt;
  return static_cast<std::uint32_t>(value);
}

}  // namespace

engine_metrics read_engine_metrics(std::string_view text) {
  engine_metrics m;
  gauge_total waiting, running, usage, usage_old_name;
  m.parse = parse_prometheus_text(text, [&](const prometheus_sample& s) {
    const std::string_view name = s.name;
    if (name == "vllm:num_requests_waiting" || name == "sglang:num_queue_reqs") waiting.add(s.value);
    else if (name == "vllm:num_requests_running" || name == "sglang:num_running_reqs") running.add(s.value);
    else if (name == "vllm:kv_cache_usage_perc" || name == "sglang:token_usage") usage.add(s.value);
    else if (name == "vllm:gpu_cache_usage_perc") usage_old_name.add(s.value);
    else if (name == "vllm:cache_config_info") {
      if (auto size = label_integer<std::uint32_t>(s, "block_size")) m.block_size = size;
      if (auto blocks = label_integer<std::uint64_t>(s, "num_gpu_blocks")) m.num_gpu_blocks = blocks;
    } else if (name == "process_start_time_seconds") {
      if (std::isfinite(s.value) && s.value > 0) m.start_time = s.value;
    } else if (name == "sglang:max_prefill_tokens") {
      if (auto tokens = positive_count(s.value)) m.max_num_batched_tokens = tokens;
    }
  });
  m.waiting_requests = waiting.total();
  m.running_requests = running.total();
  // Older vLLM names the usage gauge gpu_cache_usage_perc; the current name wins when both exist.
  m.kv_cache_usage = usage.series ? usage.mean() : usage_old_name.mean();
  return m;
}

}  // namespace kvr
