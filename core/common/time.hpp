#pragma once
/// Time in core is always an argument: callers read the clock, core only compares.

#include <chrono>

namespace kvr {

/// A point on the router's monotonic timeline.
using time_point = std::chrono::steady_clock::time_point;
using duration = std::chrono::steady_clock::duration;

}  // namespace kvr
