// libFuzzer target: arbitrary bytes as an engine's /metrics answer. The parser must count every
// line as a sample, a comment, a blank or a malformed line (never more than the lines there
// are), and what the router reads from it must be usable numbers: finite, non-negative counts.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/metrics/engine_metrics.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::size_t lines = 0;
  for (char c : text) lines += c == '\n';
  ++lines;

  std::size_t labels_seen = 0;
  const kvr::prometheus_parse_result parsed = kvr::parse_prometheus_text(text, [&](const kvr::prometheus_sample& s) {
    if (s.name.empty() || s.labels.size() > kvr::prometheus_max_labels) std::abort();
    labels_seen += s.labels.size();
  });
  if (parsed.samples + parsed.malformed > lines) std::abort();
  if (labels_seen > size) std::abort();  // every label costs at least a few bytes of input

  const kvr::engine_metrics m = kvr::read_engine_metrics(text);
  for (const auto& value : {m.waiting_requests, m.running_requests, m.kv_cache_usage})
    if (value && (!std::isfinite(*value) || *value < 0)) std::abort();
  if (m.block_size && *m.block_size == 0) std::abort();
  if (m.parse.samples != parsed.samples || m.parse.malformed != parsed.malformed) std::abort();
  return 0;
}
