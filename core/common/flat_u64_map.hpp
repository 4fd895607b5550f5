#pragma once
/// An open-addressing hash map from u64 keys to small trivially copyable values.
///
/// Linear probing over one flat array (no node per entry), the key mixed by `Mix` (splitmix64's
/// finalizer by default: keys may be small integers or arithmetic progressions, such as test
/// and SGLang hashes; keys that are already well spread can take a cheaper one), backward-shift
/// deletion (no tombstones, so probe lengths stay short under churn). Key 0 is stored out of
/// band. Pointers returned by `find` / `try_emplace` are valid until the next insertion.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace kvr {

/// splitmix64's finalizer: engine hashes can be arithmetic progressions (SGLang, tests), on
/// which a bare multiplicative hash clusters badly under linear probing.
struct splitmix_mix {
  [[nodiscard]] std::uint64_t operator()(std::uint64_t key) const {
    key ^= key >> 30;
    key *= 0xBF58476D1CE4E5B9ull;
    key ^= key >> 27;
    key *= 0x94D049BB133111EBull;
    return key ^ (key >> 31);
  }
};

/// One multiplication (Fibonacci hashing; the table takes the top bits): for keys whose bits
/// all vary, such as packed text bytes.
struct fibonacci_mix {
  [[nodiscard]] std::uint64_t operator()(std::uint64_t key) const { return key * 0x9E3779B97F4A7C15ull; }
};

template <class Value, class Mix = splitmix_mix>
class flat_u64_map {
  static_assert(std::is_trivially_copyable_v<Value>, "values are moved around with the slots");

 public:
  flat_u64_map() = default;

  [[nodiscard]] std::size_t size() const { return size_ + (has_zero_ ? 1 : 0); }
  [[nodiscard]] bool empty() const { return size() == 0; }

  /// Bytes held by the table (slots), for memory accounting.
  [[nodiscard]] std::size_t memory_bytes() const { return slots_.capacity() * sizeof(slot); }

  void clear() {
    slots_.clear();
    slots_.shrink_to_fit();
    size_ = 0;
    has_zero_ = false;
    shift_ = 64;
  }

  void swap(flat_u64_map& other) noexcept {
    slots_.swap(other.slots_);
    std::swap(size_, other.size_);
    std::swap(shift_, other.shift_);
    std::swap(has_zero_, other.has_zero_);
    std::swap(zero_value_, other.zero_value_);
  }

  void reserve(std::size_t count) {
    std::size_t needed = 16;
    while (needed * max_load_num < count * max_load_den) needed *= 2;
    if (needed > slots_.size()) rehash(needed);
  }

  [[nodiscard]] Value* find(std::uint64_t key) {
    if (key == 0) return has_zero_ ? &zero_value_ : nullptr;
    if (slots_.empty()) return nullptr;
    for (std::size_t i = home(key);; i = next(i)) {
      slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == 0) return nullptr;
    }
  }
  [[nodiscard]] const Value* find(std::uint64_t key) const { return const_cast<flat_u64_map*>(this)->find(key); }

  /// Starts loading the cache line where `key`'s probe begins. Batched operations call this for
  /// every key first, so that their cache misses overlap instead of queueing.
  void prefetch(std::uint64_t key) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[home(key)]);
  }

  /// Inserts `value` under `key` unless present; returns the stored value and whether it was new.
  std::pair<Value*, bool> try_emplace(std::uint64_t key, const Value& value = Value{}) {
    if (key == 0) {
      const bool inserted = !has_zero_;
      if (inserted) zero_value_ = value;
      has_zero_ = true;
      return {&zero_value_, inserted};
    }
    if ((size_ + 1) * max_load_den > slots_.size() * max_load_num) rehash(slots_.empty() ? 16 : slots_.size() * 2);
    for (std::size_t i = home(key);; i = next(i)) {
      slot& s = slots_[i];
      if (s.key == key) return {&s.value, false};
      if (s.key == 0) {
        s.key = key;
        s.value = value;
        ++size_;
        return {&s.value, true};
      }
    }
  }

  /// Inserts or overwrites.
  Value& insert_or_assign(std::uint64_t key, const Value& value) {
    auto [stored, inserted] = try_emplace(key, value);
    if (!inserted) *stored = value;
    return *stored;
  }

  bool erase(std::uint64_t key) {
    if (key == 0) return std::exchange(has_zero_, false);
    const std::size_t at = slot_of(key);
    if (at == npos) return false;
    erase_slot(at);
    return true;
  }

  /// Removes `key` and returns its value, if it was there: one probe where `find` and then
  /// `erase` take two.
  std::optional<Value> extract(std::uint64_t key) {
    if (key == 0) {
      if (!std::exchange(has_zero_, false)) return std::nullopt;
      return zero_value_;
    }
    const std::size_t at = slot_of(key);
    if (at == npos) return std::nullopt;
    const Value value = slots_[at].value;
    erase_slot(at);
    return value;
  }

  /// Calls `fn(value&)` on the value under `key`, if there is one, and erases the entry if it
  /// returns true: one probe where `find` and then `erase` take two. Returns whether `key` was
  /// there.
  template <class Fn>
  bool update_or_erase(std::uint64_t key, Fn&& fn) {
    if (key == 0) {
      if (!has_zero_) return false;
      if (fn(zero_value_)) has_zero_ = false;
      return true;
    }
    const std::size_t at = slot_of(key);
    if (at == npos) return false;
    if (fn(slots_[at].value)) erase_slot(at);
    return true;
  }

  /// Calls `fn(key, value&)` for every entry.
  template <class Fn>
  void for_each(Fn&& fn) {
    if (has_zero_) fn(std::uint64_t{0}, zero_value_);
    for (slot& s : slots_)
      if (s.key != 0) fn(s.key, s.value);
  }
  template <class Fn>
  void for_each(Fn&& fn) const {
    if (has_zero_) fn(std::uint64_t{0}, zero_value_);
    for (const slot& s : slots_)
      if (s.key != 0) fn(s.key, s.value);
  }

  /// Removes every entry for which `pred(key, value)` holds. O(capacity).
  template <class Pred>
  std::size_t erase_if(Pred&& pred) {
    std::size_t removed = 0;
    if (has_zero_ && pred(std::uint64_t{0}, std::as_const(zero_value_))) {
      has_zero_ = false;
      ++removed;
    }
    std::vector<slot> old;
    old.swap(slots_);
    const std::size_t capacity = old.size();
    size_ = 0;
    slots_.assign(capacity, slot{});
    for (const slot& s : old) {
      if (s.key == 0) continue;
      if (pred(s.key, s.value)) {
        ++removed;
        continue;
      }
      place(s);
    }
    return removed;
  }

 private:
  struct slot {
    std::uint64_t key = 0;
    Value value{};
  };
  static constexpr std::size_t max_load_num = 7;  // grow beyond 70% full
  static constexpr std::size_t max_load_den = 10;

  static constexpr std::size_t npos = ~std::size_t{0};

  /// The slot holding non-zero `key`, or npos.
  [[nodiscard]] std::size_t slot_of(std::uint64_t key) const {
    if (slots_.empty()) return npos;
    for (std::size_t i = home(key);; i = next(i)) {
      if (slots_[i].key == key) return i;
      if (slots_[i].key == 0) return npos;
    }
  }

  /// Backward-shift deletion: pulls later entries of the cluster into the hole when the hole
  /// lies on their probe path.
  void erase_slot(std::size_t hole) {
    for (std::size_t i = next(hole);; i = next(i)) {
      slot& s = slots_[i];
      if (s.key == 0) break;
      const std::size_t ideal = home(s.key);
      const bool hole_on_path = ((i - ideal) & mask()) >= ((i - hole) & mask());
      if (hole_on_path) {
        slots_[hole] = s;
        hole = i;
      }
    }
    slots_[hole] = slot{};
    --size_;
  }

  [[nodiscard]] std::size_t mask() const { return slots_.size() - 1; }
  [[nodiscard]] std::size_t home(std::uint64_t key) const { return static_cast<std::size_t>(Mix{}(key) >> shift_); }
  [[nodiscard]] std::size_t next(std::size_t i) const { return (i + 1) & mask(); }

  void place(const slot& entry) {
    std::size_t i = home(entry.key);
    while (slots_[i].key != 0) i = next(i);
    slots_[i] = entry;
    ++size_;
  }

  void rehash(std::size_t capacity) {
    std::vector<slot> old;
    old.swap(slots_);
    slots_.assign(capacity, slot{});
    shift_ = 64 - std::countr_zero(capacity);
    size_ = 0;
    for (const slot& s : old)
      if (s.key != 0) place(s);
  }

  std::vector<slot> slots_;
  std::size_t size_ = 0;
  int shift_ = 64;
  bool has_zero_ = false;
  Value zero_value_{};
};

}  // namespace kvr
