#pragma once
/// The tokenizer's cache of merged pieces: a pre-tokenized piece's bytes → its token ids.
///
/// Prose repeats a few thousand pieces, so nearly every piece is a hit and the lookup is the
/// tokenizer's inner loop. Three tiers by length keep it short:
/// - up to 7 bytes (about 3 pieces in 4): the bytes themselves are the key, so a hit needs no
///   hash and no comparison;
/// - 8 to 16 bytes: a multiply-mix of two words, the words kept in the entry for the check;
/// - 17 to max_piece bytes: XXH3, the bytes kept in a side store for the check.
/// A one-token piece, the common case, holds its id in its entry. Bounded: past max_ids ids of
/// multi-token pieces or max_bytes stored bytes, the cache starts over (one-token pieces are at
/// most the vocabulary). Header-only: the lookup inlines into the
/// tokenizer's loop.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <xxhash.h>

#include "core/common/flat_u64_map.hpp"

namespace kvr {

class piece_cache {
 public:
  static constexpr std::size_t max_piece = 256;  ///< longer pieces are not cached
  static constexpr std::size_t max_ids = 1u << 22;
  static constexpr std::size_t max_bytes = 1u << 24;

  /// A piece's key, computed once for the lookup and the insertion that may follow.
  struct key {
    std::uint64_t hash = 0;  ///< the short tier's exact key, or the other tiers' hash
    std::uint64_t low = 0, high = 0;  ///< the medium tier's words
  };

  /// The key of the piece `text.substr(from, size)` (size >= 1). Reads within `text` only.
  [[nodiscard]] static key key_of(std::string_view text, std::size_t from, std::size_t size) {
    const char* p = text.data() + from;
    if (size <= max_short) {
      std::uint64_t word = 0;
      if (from + 8 <= text.size()) {  // one load, masked
        std::memcpy(&word, p, 8);
        word &= (std::uint64_t{1} << (size * 8)) - 1;
      } else {
        std::memcpy(&word, p, size);
      }
      return {word | (std::uint64_t{size} << 56)};
    }
    if (size <= max_medium) {
      key k;
      std::memcpy(&k.low, p, 8);
      if (size > 8) {  // bytes 8..size-1, from a load that ends at the piece's end
        std::memcpy(&k.high, p + size - 8, 8);
        k.high >>= (16 - size) * 8;
      }
      k.hash = (k.low * 0x9E3779B97F4A7C15ull) ^ ((k.high + size) * 0xC2B2AE3D27D4EB4Full);
      return k;
    }
    return {XXH3_64bits(p, size)};
  }

  /// Appends the cached ids of `piece` (whose key is `k`) to `out`; false if not cached.
  bool append(std::string_view piece, const key& k, std::vector<std::uint32_t>& out) const {
    const id_span* ids = find(piece, k);
    if (ids == nullptr) return false;
    if (ids->count == 1) out.push_back(ids->first);
    else out.insert(out.end(), ids_.begin() + ids->offset, ids_.begin() + ids->offset + ids->count);
    return true;
  }

  /// Remembers `ids` (at least one) as the tokens of `piece`.
  void insert(std::string_view piece, const key& k, std::span<const std::uint32_t> ids) {
    const std::size_t size = piece.size();
    if (size > max_piece || ids.empty()) return;
    const std::size_t stored_bytes = size > max_medium ? size : 0;
    if (ids_.size() + ids.size() > max_ids || bytes_.size() + stored_bytes > max_bytes) clear();
    const id_span where = store(ids);
    if (size <= max_short) {
      short_.insert_or_assign(k.hash, {where});
    } else if (size <= max_medium) {
      medium_.insert_or_assign(k.hash, {k.low, k.high, where, static_cast<std::uint32_t>(size)});
    } else {
      long_.insert_or_assign(k.hash, {where, static_cast<std::uint32_t>(bytes_.size()), static_cast<std::uint32_t>(size)});
      bytes_.append(piece);
    }
  }

  void clear() {
    short_.clear();
    medium_.clear();
    long_.clear();
    ids_.clear();
    bytes_.clear();
  }

 private:
  static constexpr std::size_t max_short = 7;
  static constexpr std::size_t max_medium = 16;

  /// A piece's ids: the first inline, all of them at `offset` in ids_ when there are several.
  struct id_span {
    std::uint32_t first, offset, count;
  };
  struct short_entry {
    id_span ids;
  };
  struct medium_entry {
    std::uint64_t low, high;
    id_span ids;
    std::uint32_t size;
  };
  struct long_entry {
    id_span ids;
    std::uint32_t bytes_offset, bytes_size;
  };

  /// The ids cached for `piece` (key `k`), or null.
  [[nodiscard]] const id_span* find(std::string_view piece, const key& k) const {
    const std::size_t size = piece.size();
    if (size <= max_short) {  // the key is the bytes
      const short_entry* e = short_.find(k.hash);
      return e != nullptr ? &e->ids : nullptr;
    }
    if (size <= max_medium) {
      const medium_entry* e = medium_.find(k.hash);
      return e != nullptr && e->low == k.low && e->high == k.high && e->size == size ? &e->ids : nullptr;
    }
    const long_entry* e = long_.find(k.hash);
    return e != nullptr && std::string_view(bytes_).substr(e->bytes_offset, e->bytes_size) == piece ? &e->ids : nullptr;
  }

  id_span store(std::span<const std::uint32_t> ids) {
    const id_span where{ids.front(), static_cast<std::uint32_t>(ids_.size()), static_cast<std::uint32_t>(ids.size())};
    if (ids.size() > 1) ids_.insert(ids_.end(), ids.begin(), ids.end());
    return where;
  }

  flat_u64_map<short_entry, fibonacci_mix> short_;  // text bytes: one multiply spreads them
  flat_u64_map<medium_entry, fibonacci_mix> medium_;  // already mixed by key_of
  flat_u64_map<long_entry, fibonacci_mix> long_;      // XXH3

  std::vector<std::uint32_t> ids_;
  std::string bytes_;
};

}  // namespace kvr
