#pragma once
/// Token ids of whole text segments (the text between two special tokens), least recently used
/// first out, bounded by the number of ids held.
///
/// Why this gives exact prefix reuse: a HuggingFace tokenizer splits special (added) tokens out
/// first and tokenizes each remaining segment on its own, so a segment's ids never depend on
/// its neighbours. A rendered chat is special tokens around one segment per message; when a
/// conversation grows by a turn, every earlier message is a segment seen before, and only the
/// new ones are tokenized.

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

namespace kvr {

class segment_cache {
 public:
  explicit segment_cache(std::size_t max_ids) : max_ids_(max_ids) {}

  /// The ids cached for the segment with this hash and byte length, or null.
  [[nodiscard]] const std::vector<std::uint32_t>* find(std::uint64_t hash, std::size_t bytes) {
    const auto it = entries_.find(hash);
    if (it == entries_.end() || it->second.bytes != bytes) {
      ++misses_;
      return nullptr;
    }
    order_.splice(order_.begin(), order_, it->second.position);
    ++hits_;
    return &it->second.ids;
  }

  void insert(std::uint64_t hash, std::size_t bytes, std::span<const std::uint32_t> ids) {
    if (ids.size() > max_ids_ || entries_.contains(hash)) return;
    while (held_ids_ + ids.size() > max_ids_ && !order_.empty()) {
      const auto oldest = entries_.find(order_.back());
      held_ids_ -= oldest->second.ids.size();
      entries_.erase(oldest);
      order_.pop_back();
    }
    order_.push_front(hash);
    entries_.emplace(hash, entry{bytes, {ids.begin(), ids.end()}, order_.begin()});
    held_ids_ += ids.size();
  }

  [[nodiscard]] std::uint64_t hits() const { return hits_; }
  [[nodiscard]] std::uint64_t misses() const { return misses_; }
  [[nodiscard]] std::size_t held_ids() const { return held_ids_; }

 private:
  struct entry {
    std::size_t bytes;
    std::vector<std::uint32_t> ids;
    std::list<std::uint64_t>::iterator position;
  };
  std::size_t max_ids_;
  std::size_t held_ids_ = 0;
  std::unordered_map<std::uint64_t, entry> entries_;
  std::list<std::uint64_t> order_;  ///< most recently used first
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
};

}  // namespace kvr
