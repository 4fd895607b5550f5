#include "core/kv/msgpack_view.hpp"

#include <array>
#include <bit>
#include <cstring>

namespace kvr {
namespace {

/// A value's header as read from its first bytes (msgpack spec, "formats").
struct header {
  mp_kind type = mp_kind::nil;
  std::uint8_t header_bytes = 1;
  std::uint32_t length = 0;  ///< elements, pairs or data bytes
  std::uint64_t bits = 0;    ///< the scalar's value
};

enum class read_status : std::uint8_t { ok, truncated, malformed };

/// Reads the header at `p` with `available` bytes left; checks only the header's own bytes.
read_status read_header(const std::uint8_t* p, std::size_t available, header& h) {
  if (available == 0) return read_status::truncated;
  const std::uint8_t marker = p[0];
  h = header{};
  // The header is the marker plus `extra` bytes; `scalar` says how to read them.
  auto need = [&](std::size_t extra) { return available >= 1 + extra; };
  auto sized = [&](mp_kind type, std::size_t width, std::uint8_t skip_after = 0) {
    if (!need(width + skip_after)) return read_status::truncated;
    h.type = type;
    h.header_bytes = static_cast<std::uint8_t>(1 + width + skip_after);
    h.length = width == 1 ? p[1] : width == 2 ? load_big_endian<std::uint16_t>(p + 1) : load_big_endian<std::uint32_t>(p + 1);
    return read_status::ok;
  };
  auto unsigned_of = [&](std::size_t width) {
    if (!need(width)) return read_status::truncated;
    h.type = mp_kind::uint;
    h.header_bytes = static_cast<std::uint8_t>(1 + width);
    switch (width) {
      case 1: h.bits = p[1]; break;
      case 2: h.bits = load_big_endian<std::uint16_t>(p + 1); break;
      case 4: h.bits = load_big_endian<std::uint32_t>(p + 1); break;
      default: h.bits = load_big_endian<std::uint64_t>(p + 1); break;
    }
    return read_status::ok;
  };
  /// Signed formats holding a non-negative value read as uint, as msgpack-c reports them.
  auto signed_of = [&](std::size_t width) {
    if (!need(width)) return read_status::truncated;
    h.header_bytes = static_cast<std::uint8_t>(1 + width);
    std::int64_t value = 0;
    switch (width) {
      case 1: value = static_cast<std::int8_t>(p[1]); break;
      case 2: value = static_cast<std::int16_t>(load_big_endian<std::uint16_t>(p + 1)); break;
      case 4: value = static_cast<std::int32_t>(load_big_endian<std::uint32_t>(p + 1)); break;
      default: value = static_cast<std::int64_t>(load_big_endian<std::uint64_t>(p + 1)); break;
    }
    h.type = value < 0 ? mp_kind::sint : mp_kind::uint;
    h.bits = static_cast<std::uint64_t>(value);
    return read_status::ok;
  };
  auto fixed_ext = [&](std::uint32_t data) {
    if (!need(1)) return read_status::truncated;
    h.type = mp_kind::ext;
    h.header_bytes = 2;  // marker, ext type
    h.length = data;
    return read_status::ok;
  };

  if (marker <= 0x7f) {
    h.type = mp_kind::uint;
    h.bits = marker;
    return read_status::ok;
  }
  if (marker >= 0xe0) {
    h.type = mp_kind::sint;
    h.bits = static_cast<std::uint64_t>(static_cast<std::int64_t>(static_cast<std::int8_t>(marker)));
    return read_status::ok;
  }
  if (marker <= 0x8f) return h.type = mp_kind::map, h.length = marker & 0x0f, read_status::ok;
  if (marker <= 0x9f) return h.type = mp_kind::array, h.length = marker & 0x0f, read_status::ok;
  if (marker <= 0xbf) return h.type = mp_kind::str, h.length = marker & 0x1f, read_status::ok;
  switch (marker) {
    case 0xc0: return read_status::ok;  // nil
    case 0xc2: h.type = mp_kind::boolean; return read_status::ok;
    case 0xc3: h.type = mp_kind::boolean; h.bits = 1; return read_status::ok;
    case 0xc4: return sized(mp_kind::bin, 1);
    case 0xc5: return sized(mp_kind::bin, 2);
    case 0xc6: return sized(mp_kind::bin, 4);
    case 0xc7: return sized(mp_kind::ext, 1, 1);
    case 0xc8: return sized(mp_kind::ext, 2, 1);
    case 0xc9: return sized(mp_kind::ext, 4, 1);
    case 0xca:
      if (!need(4)) return read_status::truncated;
      h.type = mp_kind::f64;
      h.header_bytes = 5;
      h.bits = std::bit_cast<std::uint64_t>(static_cast<double>(std::bit_cast<float>(load_big_endian<std::uint32_t>(p + 1))));
      return read_status::ok;
    case 0xcb:
      if (!need(8)) return read_status::truncated;
      h.type = mp_kind::f64;
      h.header_bytes = 9;
      h.bits = load_big_endian<std::uint64_t>(p + 1);
      return read_status::ok;
    case 0xcc: return unsigned_of(1);
    case 0xcd: return unsigned_of(2);
    case 0xce: return unsigned_of(4);
    case 0xcf: return unsigned_of(8);
    case 0xd0: return signed_of(1);
    case 0xd1: return signed_of(2);
    case 0xd2: return signed_of(4);
    case 0xd3: return signed_of(8);
    case 0xd4: return fixed_ext(1);
    case 0xd5: return fixed_ext(2);
    case 0xd6: return fixed_ext(4);
    case 0xd7: return fixed_ext(8);
    case 0xd8: return fixed_ext(16);
    case 0xd9: return sized(mp_kind::str, 1);
    case 0xda: return sized(mp_kind::str, 2);
    case 0xdb: return sized(mp_kind::str, 4);
    case 0xdc: return sized(mp_kind::array, 2);
    case 0xdd: return sized(mp_kind::array, 4);
    case 0xde: return sized(mp_kind::map, 2);
    case 0xdf: return sized(mp_kind::map, 4);
    default: return read_status::malformed;  // 0xc1, never used
  }
}

bool has_data(mp_kind type) { return type == mp_kind::str || type == mp_kind::bin || type == mp_kind::ext; }

std::uint64_t children_of(const header& h) {
  if (h.type == mp_kind::array) return h.length;
  if (h.type == mp_kind::map) return 2ull * h.length;
  return 0;
}

}  // namespace

std::string_view to_string(mp_error error) {
  switch (error) {
    case mp_error::truncated: return "truncated msgpack";
    case mp_error::malformed: return "malformed msgpack";
    case mp_error::too_deep: return "msgpack nested too deeply";
    case mp_error::trailing_bytes: return "bytes after the msgpack value";
  }
  return "msgpack error";
}

void mp_ref::read_other_header() {
  header h;
  if (read_header(at_, static_cast<std::size_t>(end_ - at_), h) != read_status::ok) {
    header_bytes_ = 0;  // cannot happen inside an accepted buffer; read as an empty nil
    return;
  }
  type_ = h.type;
  header_bytes_ = h.header_bytes;
  length_ = h.length;
  value_.u = h.bits;
}

mp_ref mp_ref::skip_subtree() const {
  const std::uint8_t* p = at_ + header_bytes_ + data_bytes();
  // Values still owed before the subtree ends: each read pays one and adds its children.
  for (std::uint64_t owed = children(); owed > 0 && p < end_; --owed) {
    const mp_ref value(p, end_);
    p += value.header_bytes_ + value.data_bytes();
    owed += value.children();
  }
  return {p, end_};
}

mp_ref mp_ref::element(std::uint32_t i) const {
  mp_ref child = first_child();
  for (; i > 0; --i) child = child.next_sibling();
  return child;
}

std::optional<mp_ref> mp_ref::find(std::string_view key) const {
  mp_ref k = first_child();
  for (std::uint32_t pair = 0; pair < size(); ++pair) {
    const mp_ref value = k.next_sibling();
    if (k.is_str() && k.str() == key) return value;
    k = value.next_sibling();
  }
  return std::nullopt;
}

std::expected<mp_ref, mp_error> mp_parse(std::span<const std::uint8_t> bytes, std::uint32_t max_depth) {
  if (bytes.empty()) return std::unexpected(mp_error::truncated);
  max_depth = std::min(max_depth, mp_max_depth_limit);
  const std::uint8_t* const begin = bytes.data();
  const std::uint8_t* const end = begin + bytes.size();
  // owed[d]: values still to read in the container open at depth d (0: the root itself).
  std::array<std::uint64_t, mp_max_depth_limit + 1> owed{};
  std::uint32_t depth = 0;
  owed[0] = 1;
  const std::uint8_t* p = begin;
  for (;;) {
    // Runs of integers (token ids, hashes: most of a payload) in a loop of their own, the
    // count of values owed kept in a register.
    for (std::uint64_t left = owed[depth];;) {
      if (p == end) return std::unexpected(mp_error::truncated);
      const std::uint8_t marker = *p;
      if (marker <= 0x7f || marker >= 0xe0) {  // fixints
        ++p;
      } else if (marker >= 0xcc && marker <= 0xcf) {  // unsigned integers
        const std::size_t width = std::size_t{1} << (marker - 0xcc);
        if (width >= static_cast<std::size_t>(end - p)) return std::unexpected(mp_error::truncated);
        p += 1 + width;
      } else {
        owed[depth] = left;
        break;
      }
      if (--left == 0) {
        owed[depth] = 0;
        break;
      }
    }
    const auto available = static_cast<std::size_t>(end - p);
    if (owed[depth] == 0) {
      // the container at this depth is complete: fall through to closing it
    } else if (available == 0) {
      return std::unexpected(mp_error::truncated);
    } else {  // any other value: its header decoded in full
      header h;
      switch (read_header(p, available, h)) {
        case read_status::truncated: return std::unexpected(mp_error::truncated);
        case read_status::malformed: return std::unexpected(mp_error::malformed);
        case read_status::ok: break;
      }
      const std::uint64_t data = has_data(h.type) ? h.length : 0;
      if (data > available - h.header_bytes) return std::unexpected(mp_error::truncated);
      p += h.header_bytes + data;
      --owed[depth];
      if (h.type == mp_kind::array || h.type == mp_kind::map) {
        if (depth >= max_depth) return std::unexpected(mp_error::too_deep);
        if (const std::uint64_t nested = children_of(h); nested > 0) owed[++depth] = nested;
      }
    }
    while (owed[depth] == 0) {
      if (depth == 0) {
        if (p != end) return std::unexpected(mp_error::trailing_bytes);
        return mp_ref(begin, end);
      }
      --depth;
    }
  }
}

}  // namespace kvr
