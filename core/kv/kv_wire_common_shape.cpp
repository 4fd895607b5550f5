#include "core/kv/kv_wire_common_shape.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <string_view>

#include "core/kv/kv_wire.hpp"
#include "core/kv/msgpack_token_ids.hpp"
#include "core/kv/msgpack_view.hpp"

namespace kvr {
namespace {

/// Reads msgpack values of the few formats the common shape uses, each checked against the
/// bytes left. Every reader returns false, without a promise about the position, on anything
/// else: the caller then declines the whole payload.
class common_shape_reader {
 public:
  explicit common_shape_reader(std::span<const std::uint8_t> bytes) : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  [[nodiscard]] bool at_end() const { return p_ == end_; }
  [[nodiscard]] std::size_t left() const { return static_cast<std::size_t>(end_ - p_); }

  bool nil() {
    if (p_ == end_ || *p_ != 0xc0) return false;
    ++p_;
    return true;
  }

  /// An array header; `n` is its element count.
  bool array(std::uint32_t& n) {
    if (p_ == end_) return false;
    const std::uint8_t marker = *p_;
    std::size_t header = 0;
    if ((marker & 0xf0) == 0x90) header = 1, n = marker & 0x0f;
    else if (marker == 0xdc && left() >= 3) header = 3, n = load_big_endian<std::uint16_t>(p_ + 1);
    else if (marker == 0xdd && left() >= 5) header = 5, n = load_big_endian<std::uint32_t>(p_ + 1);
    else return false;
    p_ += header;
    return true;
  }

  /// A string of any width, in place.
  bool str(std::string_view& s) {
    if (p_ == end_) return false;
    const std::uint8_t marker = *p_;
    std::size_t header = 0, length = 0;
    if ((marker & 0xe0) == 0xa0) header = 1, length = marker & 0x1f;
    else if (marker == 0xd9 && left() >= 2) header = 2, length = p_[1];
    else if (marker == 0xda && left() >= 3) header = 3, length = load_big_endian<std::uint16_t>(p_ + 1);
    else if (marker == 0xdb && left() >= 5) header = 5, length = load_big_endian<std::uint32_t>(p_ + 1);
    else return false;
    if (length > left() - header) return false;
    s = {reinterpret_cast<const char*>(p_ + header), length};
    p_ += header + length;
    return true;
  }

  /// Any integer format as 64 bits, a negative value as its two's-complement pattern (how
  /// engine hashes are keyed; `integer` and `timestamp` read their values from it).
  bool integer_bits(std::uint64_t& value) {
    if (p_ == end_) return false;
    const std::uint8_t marker = *p_;
    if (marker <= 0x7f || marker >= 0xe0) {  // positive and negative fixints: the byte is the value
      value = static_cast<std::uint64_t>(std::int64_t{static_cast<std::int8_t>(marker)});
      ++p_;
      return true;
    }
    if (marker < 0xcc || marker > 0xd3) return false;
    const std::size_t width = std::size_t{1} << ((marker - 0xcc) & 3);
    if (left() <= width) return false;
    const std::uint8_t* data = p_ + 1;
    p_ += 1 + width;
    const bool is_signed = marker >= 0xd0;
    switch (width) {
      case 1: value = is_signed ? static_cast<std::uint64_t>(std::int64_t{static_cast<std::int8_t>(data[0])}) : data[0]; break;
      case 2: {
        const auto bits = load_big_endian<std::uint16_t>(data);
        value = is_signed ? static_cast<std::uint64_t>(std::int64_t{static_cast<std::int16_t>(bits)}) : bits;
        break;
      }
      case 4: {
        const auto bits = load_big_endian<std::uint32_t>(data);
        value = is_signed ? static_cast<std::uint64_t>(std::int64_t{static_cast<std::int32_t>(bits)}) : bits;
        break;
      }
      default: value = load_big_endian<std::uint64_t>(data); break;
    }
    return true;
  }

  /// An integer that fits in int64 (an unsigned one above 2^63-1 does not).
  bool integer(std::int64_t& value) {
    const bool unsigned_64 = p_ != end_ && *p_ == 0xcf;
    std::uint64_t bits = 0;
    if (!integer_bits(bits)) return false;
    if (unsigned_64 && bits > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return false;
    value = static_cast<std::int64_t>(bits);
    return true;
  }

  bool optional_integer(std::optional<std::int64_t>& value) {
    if (nil()) {
      value.reset();
      return true;
    }
    std::int64_t read = 0;
    if (!integer(read)) return false;
    value = read;
    return true;
  }

  /// nil reads as the empty string.
  bool optional_str(std::string& value) {
    if (nil()) {
      value.clear();
      return true;
    }
    std::string_view read;
    if (!str(read)) return false;
    value.assign(read);
    return true;
  }

  /// A batch's `ts`: a float, an integer (what an encoder may make of a whole number), or nil
  /// (zero).
  bool timestamp(double& value) {
    if (nil()) {
      value = 0;
      return true;
    }
    if (p_ == end_) return false;
    const std::uint8_t marker = *p_;
    if (marker == 0xcb && left() >= 9) {
      value = std::bit_cast<double>(load_big_endian<std::uint64_t>(p_ + 1));
      p_ += 9;
      return true;
    }
    if (marker == 0xca && left() >= 5) {
      value = static_cast<double>(std::bit_cast<float>(load_big_endian<std::uint32_t>(p_ + 1)));
      p_ += 5;
      return true;
    }
    std::uint64_t bits = 0;
    if (!integer_bits(bits)) return false;
    const bool is_signed = marker >= 0xd0;  // 0xd0-0xd3 and negative fixints
    value = is_signed ? static_cast<double>(static_cast<std::int64_t>(bits)) : static_cast<double>(bits);
    return true;
  }

  bool hashes(std::vector<std::uint64_t>& out) {
    std::uint32_t n = 0;
    if (!array(n) || n > left()) return false;  // every hash takes at least a byte
    out.resize(n);
    for (std::uint64_t& hash_value : out)
      if (!integer_bits(hash_value)) return false;
    return true;
  }

  /// Token ids: unsigned integers below 2^32 in their usual widths (msgpack_token_ids).
  bool token_ids(std::vector<std::uint32_t>& out) {
    std::uint32_t n = 0;
    if (!array(n) || n > left()) return false;
    out.resize(n);
    const std::uint8_t* after = read_msgpack_token_ids(p_, end_, out);
    if (after == nullptr) return false;
    p_ = after;
    return true;
  }

  /// `extra_keys` with nothing in them: nil, or a nil per block.
  bool no_extra_keys() {
    if (nil()) return true;
    std::uint32_t n = 0;
    if (!array(n) || n > left()) return false;
    for (std::uint32_t i = 0; i < n; ++i, ++p_)
      if (*p_ != 0xc0) return false;
    return true;
  }

  /// A fixstr tag (every tag is shorter than 32 bytes).
  bool tag(std::string_view& s) {
    if (p_ == end_ || (*p_ & 0xe0) != 0xa0) return false;
    return str(s);
  }

 private:
  const std::uint8_t* p_;
  const std::uint8_t* end_;
};

/// BlockStored's fields after the tag, by position (`kv_wire`'s order): `fields` of them.
bool read_stored(common_shape_reader& in, std::uint32_t fields, kv_stored& event) {
  if (fields < 4 || fields > 11) return false;
  if (!in.hashes(event.block_hashes)) return false;
  if (!in.nil()) {
    std::uint64_t parent = 0;
    if (!in.integer_bits(parent)) return false;
    event.parent_block_hash = parent;
  }
  if (!in.token_ids(event.token_ids)) return false;
  std::int64_t block_size = 0;
  if (!in.integer(block_size) || block_size <= 0 || block_size > (1 << 20)) return false;
  event.block_size = static_cast<std::uint32_t>(block_size);
  if (fields >= 5 && !in.optional_integer(event.lora_id)) return false;
  if (fields >= 6 && !in.optional_str(event.medium)) return false;
  if (fields >= 7 && !in.optional_str(event.lora_name)) return false;
  if (fields >= 8 && !in.no_extra_keys()) return false;
  if (fields >= 9 && !in.optional_integer(event.group_idx)) return false;
  if (fields >= 10 && !in.optional_str(event.kv_cache_spec_kind)) return false;
  if (fields >= 11 && !in.optional_integer(event.sliding_window)) return false;
  return true;
}

bool read_removed(common_shape_reader& in, std::uint32_t fields, kv_removed& event) {
  if (fields < 1 || fields > 3) return false;
  if (!in.hashes(event.block_hashes)) return false;
  if (fields >= 2 && !in.optional_str(event.medium)) return false;
  if (fields >= 3 && !in.optional_integer(event.group_idx)) return false;
  return true;
}

bool read_event(common_shape_reader& in, kv_batch& out) {
  std::uint32_t n = 0;
  std::string_view tag;
  if (!in.array(n) || n == 0 || !in.tag(tag)) return false;
  if (tag == "BlockStored") return read_stored(in, n - 1, std::get<kv_stored>(out.events.emplace_back(std::in_place_type<kv_stored>)));
  if (tag == "BlockRemoved")
    return read_removed(in, n - 1, std::get<kv_removed>(out.events.emplace_back(std::in_place_type<kv_removed>)));
  if (tag == "AllBlocksCleared" && n == 1) {
    out.events.emplace_back(kv_cleared{});
    return true;
  }
  return false;
}

}  // namespace

bool decode_common_batch(std::span<const std::uint8_t> payload, kv_batch& out) {
  out.events.clear();
  out.dp_rank.reset();
  out.unknown_events = 0;
  out.malformed_events = 0;
  out.first_error.clear();

  common_shape_reader in(payload);
  std::uint32_t envelope = 0, events = 0;
  if (!in.array(envelope) || (envelope != 2 && envelope != 3)) return false;
  if (!in.timestamp(out.timestamp) || !in.array(events)) return false;
  // No more events than the bytes left could hold (the general decoder's bound).
  out.events.reserve(std::min<std::size_t>(events, in.left() / kv_wire_decoder::min_event_bytes));
  for (std::uint32_t i = 0; i < events; ++i)
    if (!read_event(in, out)) return false;
  if (envelope == 3 && !in.optional_integer(out.dp_rank)) return false;
  return in.at_end();
}

}  // namespace kvr
