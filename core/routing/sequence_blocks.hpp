#pragma once
/// One worker's blocks in a store beside the prefix index (a hybrid model's other KV-cache
/// groups, a lower tier): each engine block hash names the sequence hash of the chain at the
/// block's end, and a sequence hash is held while some engine block names it. A `tag` rides
/// along with each block (the lower tiers' store stamp; 0 where nobody needs one).

#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/common/flat_u64_map.hpp"

namespace kvr {

class sequence_blocks {
 public:
  struct block {
    std::uint64_t sequence_hash = 0;
    std::uint32_t tag = 0;
  };

  [[nodiscard]] const block* find(std::uint64_t engine_hash) const { return by_engine_hash_.find(engine_hash); }
  [[nodiscard]] bool holds(std::uint64_t sequence_hash) const { return held_.find(sequence_hash) != nullptr; }
  [[nodiscard]] std::size_t size() const { return by_engine_hash_.size(); }
  [[nodiscard]] std::size_t memory_bytes() const { return by_engine_hash_.memory_bytes() + held_.memory_bytes(); }

  /// Names `sequence_hash` by `engine_hash`, which must not name a block now (unlink it first).
  void link(std::uint64_t engine_hash, std::uint64_t sequence_hash, std::uint32_t tag = 0) {
    by_engine_hash_.insert_or_assign(engine_hash, block{sequence_hash, tag});
    ++*held_.try_emplace(sequence_hash, 0).first;
  }
  /// Forgets what `engine_hash` names; false if it named nothing.
  bool unlink(std::uint64_t engine_hash) {
    const std::optional<block> gone = by_engine_hash_.extract(engine_hash);
    if (!gone) return false;
    held_.update_or_erase(gone->sequence_hash, [](std::uint32_t& count) { return --count == 0; });
    return true;
  }

 private:
  flat_u64_map<block> by_engine_hash_;
  flat_u64_map<std::uint32_t> held_;  ///< sequence hash -> engine blocks naming it
};

}  // namespace kvr
