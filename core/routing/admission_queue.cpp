#include "core/routing/admission_queue.hpp"

#include <algorithm>
#include <cctype>

namespace kvr {

std::string_view to_string(request_priority priority) {
  switch (priority) {
    case request_priority::high: return "high";
    case request_priority::normal: return "normal";
    case request_priority::low: return "low";
  }
  return "normal";
}

std::optional<request_priority> parse_priority(std::string_view text) {
  auto is = [text](std::string_view name) {
    return std::ranges::equal(text, name, [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
  };
  if (is("high")) return request_priority::high;
  if (is("normal")) return request_priority::normal;
  if (is("low")) return request_priority::low;
  return std::nullopt;
}

request_priority effective_priority(request_priority given, duration waited, duration age_boost) {
  const auto steps = age_boost > duration::zero() ? waited / age_boost : 0;
  const auto rank = static_cast<std::int64_t>(given) - std::max<std::int64_t>(steps, 0);
  return static_cast<request_priority>(std::max<std::int64_t>(rank, 0));
}

admission_settings admission_settings_of(const router_config& config) {
  return {.capacity = config.queue_size,
          .timeout = std::chrono::seconds(config.queue_timeout_secs),
          .age_boost = std::chrono::seconds(config.queue_age_boost_secs)};
}

}  // namespace kvr
