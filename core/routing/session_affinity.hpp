#pragma once
/// Which worker each conversation was last served by, so its next turn can go there too
/// (`session_affinity_ttl_secs`): a binding per session key that lives `ttl` after its last use,
/// at most `capacity` of them (the least recently used goes first). Time is passed in.

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>

#include "core/common/time.hpp"

namespace kvr {

class session_bindings {
 public:
  explicit session_bindings(std::size_t capacity = 100000);

  /// The worker `session` is bound to, if its binding has not expired by `now`.
  [[nodiscard]] std::optional<std::uint32_t> find(std::uint64_t session, time_point now);
  /// Binds (or rebinds) `session` to `worker` until `expires`; the least recently used binding
  /// goes when full.
  void bind(std::uint64_t session, std::uint32_t worker, time_point expires);

  [[nodiscard]] std::size_t size() const { return entries_.size(); }
  /// Bindings moved to another worker because theirs could not or should not take the turn.
  [[nodiscard]] std::uint64_t moves() const { return moves_; }

 private:
  struct entry {
    std::uint32_t worker = 0;
    time_point expires{};
    std::list<std::uint64_t>::iterator position;
  };
  std::size_t capacity_;
  std::unordered_map<std::uint64_t, entry> entries_;
  std::list<std::uint64_t> recency_;  ///< most recent first
  std::uint64_t moves_ = 0;
};

}  // namespace kvr
