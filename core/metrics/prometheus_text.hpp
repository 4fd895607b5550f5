#pragma once
/// A parser of the Prometheus text exposition format (version 0.0.4), as engines serve it on
/// `/metrics`: `# HELP` / `# TYPE` comments, samples `name{label="value",...} value [timestamp]`
/// with the three label-value escapes (`\\`, `\"`, `\n`), `NaN` and `±Inf`.
///
/// The text is untrusted (a worker's answer): a malformed line is counted and skipped, never
/// fatal; work is one pass over the bytes; a sample with more than `max_labels` labels is a
/// malformed line (memory per sample is bounded).

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace kvr {

struct prometheus_label {
  std::string_view name;
  std::string value;  ///< unescaped
};

struct prometheus_sample {
  std::string_view name;
  std::span<const prometheus_label> labels;
  double value = 0.0;

  /// The value of label `name`, or null.
  [[nodiscard]] const std::string* label(std::string_view name) const;
};

struct prometheus_parse_result {
  std::size_t samples = 0;    ///< lines that were samples, handed to the callback
  std::size_t malformed = 0;  ///< lines that were neither samples, comments nor blank
};

inline constexpr std::size_t prometheus_max_labels = 64;

/// Calls `on_sample` for every well-formed sample line of `text`, in order.
prometheus_parse_result parse_prometheus_text(std::string_view text,
                                              const std::function<void(const prometheus_sample&)>& on_sample);

}  // namespace kvr
