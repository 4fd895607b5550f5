#pragma once
/// A zero-copy, allocation-free reading of one msgpack value: `mp_parse` checks the whole
/// buffer once (well-formed, exactly one value, nesting at most `max_depth`), and `mp_ref`
/// then reads values in place, decoding a header when asked and skipping a subtree by counting
/// the values still owed (no stack, no recursion).
///
/// Why not msgpack-c's `unpack` into `msgpack::object`: it allocates each array's element
/// storage up front from the declared length, so a few header bytes declaring 2^32 elements
/// force a huge allocation. Why not a tape of decoded nodes (what kvrouter used before): a node
/// per value costs 32 bytes for a value that may be one byte, so a payload of tiny values
/// multiplied into 32 times its size. Here the reader's memory does not depend on the payload at
/// all; the cost is that reaching a later sibling re-reads the headers in between, which the
/// event shapes keep to at most one extra pass.

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <expected>
#include <optional>
#include <span>
#include <string_view>

namespace kvr {

/// The big-endian `T` at `p` (msgpack's byte order for every multi-byte field).
template <class T>
[[nodiscard]] T load_big_endian(const std::uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof value);
  if constexpr (std::endian::native == std::endian::little && sizeof(T) > 1) value = std::byteswap(value);
  return value;
}

enum class mp_kind : std::uint8_t { nil, boolean, uint, sint, f64, str, bin, ext, array, map };

enum class mp_error : std::uint8_t { truncated, malformed, too_deep, trailing_bytes };
[[nodiscard]] std::string_view to_string(mp_error error);

/// One value of a buffer that `mp_parse` accepted. Cheap to copy; valid while the buffer lives.
/// Reading a value of another kind (e.g. `uint_value` of a string) is a programming error
/// checked by the caller through `type()`.
class mp_ref {
 public:
  /// Decodes the header at `at`, inside a buffer ending at `end` that `mp_parse` accepted;
  /// at the end itself (one past a last value) it reads as nil.
  mp_ref(const std::uint8_t* at, const std::uint8_t* end);

  [[nodiscard]] mp_kind type() const { return type_; }
  [[nodiscard]] bool is_nil() const { return type_ == mp_kind::nil; }
  [[nodiscard]] bool is_array() const { return type_ == mp_kind::array; }
  [[nodiscard]] bool is_map() const { return type_ == mp_kind::map; }
  [[nodiscard]] bool is_str() const { return type_ == mp_kind::str; }
  [[nodiscard]] bool is_integer() const { return type_ == mp_kind::uint || type_ == mp_kind::sint; }

  [[nodiscard]] std::uint64_t uint_value() const { return value_.u; }
  [[nodiscard]] std::int64_t int_value() const { return value_.i; }
  [[nodiscard]] double real_value() const { return value_.d; }
  [[nodiscard]] bool bool_value() const { return value_.u != 0; }
  /// Elements of an array, pairs of a map, bytes of a str / bin / ext.
  [[nodiscard]] std::uint32_t size() const { return length_; }
  [[nodiscard]] std::string_view str() const {
    return {reinterpret_cast<const char*>(at_ + header_bytes_), length_};
  }
  [[nodiscard]] std::span<const std::uint8_t> bytes() const { return {at_ + header_bytes_, length_}; }

  /// An array's first element or a map's first key (only when `size() > 0`).
  [[nodiscard]] mp_ref first_child() const { return {at_ + header_bytes_, end_}; }
  /// The value after this one's whole subtree (only when the enclosing container has one).
  [[nodiscard]] mp_ref next_sibling() const {
    if (children() == 0) return {at_ + header_bytes_ + data_bytes(), end_};
    return skip_subtree();
  }
  /// The i-th element of an array (skips the ones before: O(their bytes)).
  [[nodiscard]] mp_ref element(std::uint32_t i) const;
  /// The value under string key `key` of a map, if present.
  [[nodiscard]] std::optional<mp_ref> find(std::string_view key) const;

 private:
  friend class mp_elements;
  /// Bytes after the header that belong to this value itself (str / bin / ext data).
  [[nodiscard]] std::uint32_t data_bytes() const {
    return type_ == mp_kind::str || type_ == mp_kind::bin || type_ == mp_kind::ext ? length_ : 0;
  }
  /// Values nested directly inside (array elements, map keys and values).
  [[nodiscard]] std::uint64_t children() const {
    return type_ == mp_kind::array ? length_ : type_ == mp_kind::map ? 2ull * length_ : 0;
  }
  /// Headers other than the one-byte and plain-integer ones event payloads are made of.
  void read_other_header();
  [[nodiscard]] mp_ref skip_subtree() const;

  const std::uint8_t* at_;
  const std::uint8_t* end_;
  union {
    std::uint64_t u = 0;
    std::int64_t i;
    double d;
  } value_;
  std::uint32_t length_ = 0;
  std::uint8_t header_bytes_ = 1;
  mp_kind type_ = mp_kind::nil;
};

/// An array's elements in order, with a fast path for the unsigned integers that token ids and
/// block hashes are: loops over them stay on a byte pointer instead of a decoded value each.
class mp_elements {
 public:
  explicit mp_elements(const mp_ref& array)
      : p_(array.at_ + array.header_bytes_), end_(array.end_), left_(array.size()) {}

  [[nodiscard]] bool done() const { return left_ == 0; }
  /// The next element, if it is an unsigned integer, consumed; else nullopt and nothing moves.
  [[nodiscard]] std::optional<std::uint64_t> next_uint() {
    if (left_ == 0 || p_ == end_) return std::nullopt;
    const std::uint8_t marker = *p_;
    if (marker <= 0x7f) {
      ++p_;
      --left_;
      return marker;
    }
    if (marker < 0xcc || marker > 0xcf) return std::nullopt;
    const unsigned width = 1u << (marker - 0xcc);
    std::uint64_t value = 0;
    for (unsigned k = 1; k <= width; ++k) value = (value << 8) | p_[k];
    p_ += 1 + width;
    --left_;
    return value;
  }
  /// Consumes the leading unsigned integers of at most 32 bits, up to `out.size()` of them,
  /// into `out`; returns how many. Stops early at anything else (a wider integer, an array),
  /// which the caller reads with `next()`. The loop tokens are read in.
  [[nodiscard]] std::size_t take_u32s(std::span<std::uint32_t> out) {
    std::size_t n = 0;
    const std::uint8_t* p = p_;
    const std::size_t most = std::min<std::size_t>(out.size(), left_);
    while (n < most) {
      const std::uint8_t marker = *p;  // mp_parse checked that each value's bytes are there
      std::uint32_t value;
      if (marker <= 0x7f) {
        value = marker;
        p += 1;
      } else if (marker == 0xcd) {
        value = (std::uint32_t{p[1]} << 8) | p[2];
        p += 3;
      } else if (marker == 0xce) {
        value = (std::uint32_t{p[1]} << 24) | (std::uint32_t{p[2]} << 16) | (std::uint32_t{p[3]} << 8) | p[4];
        p += 5;
      } else if (marker == 0xcc) {
        value = p[1];
        p += 2;
      } else {
        break;
      }
      out[n++] = value;
    }
    p_ = p;
    left_ -= static_cast<std::uint32_t>(n);
    return n;
  }
  /// Consumes the nils that come next; returns how many (engines send one per block of
  /// `extra_keys` that has none).
  std::uint32_t skip_nils() {
    std::uint32_t n = 0;
    while (left_ > 0 && p_ != end_ && *p_ == 0xc0) {
      ++p_;
      --left_;
      ++n;
    }
    return n;
  }
  /// The next element, whatever it is, consumed (only when `!done()`).
  [[nodiscard]] mp_ref next() {
    const mp_ref value(p_, end_);
    p_ = value.next_sibling().at_;
    --left_;
    return value;
  }
  /// Once `done()`: the value after the array.
  [[nodiscard]] mp_ref after() const { return {p_, end_}; }

 private:
  const std::uint8_t* p_;
  const std::uint8_t* end_;
  std::uint32_t left_;
};

/// The deepest nesting `mp_parse` can be asked to allow (its checker keeps one counter per
/// level in a fixed array).
inline constexpr std::uint32_t mp_max_depth_limit = 64;

inline mp_ref::mp_ref(const std::uint8_t* at, const std::uint8_t* end) : at_(at), end_(end) {
  // The formats events are made of, decoded here inline: fixints, fixarrays, fixstrs and
  // unsigned integers (token ids, hashes). A buffer `mp_parse` accepted has their bytes.
  if (at == end) {
    header_bytes_ = 0;  // one past the last value: reads as an empty nil
    return;
  }
  const std::uint8_t marker = *at;
  if (marker <= 0x7f) {
    type_ = mp_kind::uint;
    value_.u = marker;
  } else if ((marker & 0xf0) == 0x90) {
    type_ = mp_kind::array;
    length_ = marker & 0x0f;
  } else if ((marker & 0xe0) == 0xa0) {
    type_ = mp_kind::str;
    length_ = marker & 0x1f;
  } else if (marker >= 0xcc && marker <= 0xcf) {
    type_ = mp_kind::uint;
    const unsigned width = 1u << (marker - 0xcc);
    std::uint64_t value = 0;
    for (unsigned k = 1; k <= width; ++k) value = (value << 8) | at[k];
    value_.u = value;
    header_bytes_ = static_cast<std::uint8_t>(1 + width);
  } else {
    read_other_header();
  }
}

/// Checks that `bytes` hold exactly one well-formed msgpack value nesting at most `max_depth`
/// (<= mp_max_depth_limit) containers, and returns it. Work is linear in the bytes; memory is
/// constant.
[[nodiscard]] std::expected<mp_ref, mp_error> mp_parse(std::span<const std::uint8_t> bytes, std::uint32_t max_depth);

}  // namespace kvr
