#pragma once
/// The wall clock in nanoseconds since the Unix epoch: what replicas stamp on the messages they
/// send, and what a receiver subtracts that stamp from to report its sync lag.

#include <chrono>
#include <cstdint>

namespace kvr {

inline std::int64_t unix_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace kvr
