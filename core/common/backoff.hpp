#pragma once
/// How long to wait before restarting a component that died: doubling from `initial` up to
/// `max` while it keeps dying, and back to `initial` once it had run `stable_after` without
/// dying. Time is passed in.

#include <algorithm>

#include "core/common/time.hpp"

namespace kvr {

class restart_backoff {
 public:
  restart_backoff(duration initial, duration max, duration stable_after)
      : initial_(initial), max_(std::max(initial, max)), stable_after_(stable_after), next_(initial) {}

  /// The component, running since `started`, died at `now`: the delay before its restart.
  [[nodiscard]] duration on_failure(time_point started, time_point now) {
    if (now - started >= stable_after_) next_ = initial_;
    const duration delay = next_;
    next_ = std::min(max_, next_ * 2);
    return delay;
  }

 private:
  duration initial_, max_, stable_after_, next_;
};

}  // namespace kvr
