#include "core/media/fetch_policy.hpp"

#include <algorithm>

namespace kvr {

namespace {

/// A prefix of `N` bytes: `length` leading bits of `bytes`.
template <std::size_t N>
struct prefix {
  std::array<std::uint8_t, N> bytes;
  unsigned length;
  [[nodiscard]] bool contains(const std::array<std::uint8_t, N>& address) const {
    for (unsigned bit = 0; bit < length; ++bit) {
      const unsigned byte = bit / 8, mask = 0x80u >> (bit % 8);
      if ((address[byte] & mask) != (bytes[byte] & mask)) return false;
    }
    return true;
  }
};

/// IANA's IPv4 Special-Purpose Address Registry: every block not globally reachable, plus
/// multicast and the documentation and benchmarking blocks (never an image host).
constexpr std::array<prefix<4>, 18> forbidden_v4{{
    {{0, 0, 0, 0}, 8},         // "this network"
    {{10, 0, 0, 0}, 8},        // private
    {{100, 64, 0, 0}, 10},     // shared address space (carrier-grade NAT)
    {{127, 0, 0, 0}, 8},       // loopback
    {{169, 254, 0, 0}, 16},    // link-local (cloud metadata)
    {{172, 16, 0, 0}, 12},     // private
    {{192, 0, 0, 0}, 24},      // IETF protocol assignments
    {{192, 0, 2, 0}, 24},      // documentation (TEST-NET-1)
    {{192, 88, 99, 0}, 24},    // 6to4 relay anycast (deprecated)
    {{192, 168, 0, 0}, 16},    // private
    {{198, 18, 0, 0}, 15},     // benchmarking
    {{198, 51, 100, 0}, 24},   // documentation (TEST-NET-2)
    {{203, 0, 113, 0}, 24},    // documentation (TEST-NET-3)
    {{224, 0, 0, 0}, 4},       // multicast
    {{240, 0, 0, 0}, 4},       // reserved
    {{255, 255, 255, 255}, 32},  // limited broadcast
    {{192, 31, 196, 0}, 24},   // AS112-v4 (anycast DNS sinks, no image host)
    {{192, 175, 48, 0}, 24},   // direct delegation AS112
}};

/// IANA's IPv6 Special-Purpose Address Registry, the blocks that are refused outright. Blocks
/// that embed an IPv4 address are judged by that address instead (see below).
constexpr std::array<prefix<16>, 11> forbidden_v6{{
    {{0}, 96},                                                  // ::/96: unspecified, loopback, IPv4-compatible (deprecated)
    {{0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48},                 // 64:ff9b:1::/48 local-use IPv4/IPv6 translation
    {{0x01, 0x00}, 64},                                         // 100::/64 discard-only
    {{0x20, 0x01, 0x00, 0x00}, 23},                             // 2001::/23 IETF protocol assignments (Teredo, ORCHID, ...)
    {{0x20, 0x01, 0x0d, 0xb8}, 32},                             // documentation
    {{0x3f, 0xff}, 20},                                         // documentation (3fff::/20)
    {{0x5f, 0x00}, 16},                                         // segment routing SIDs
    {{0xfc}, 7},                                                // unique local
    {{0xfe, 0x80}, 10},                                         // link-local
    {{0xfe, 0xc0}, 10},                                         // site-local (deprecated)
    {{0xff}, 8},                                                // multicast
}};

/// IPv6 blocks that carry an IPv4 address: the embedded address decides.
struct embedding {
  prefix<16> block;
  unsigned v4_offset;  ///< the byte where the IPv4 address starts
};
constexpr std::array<embedding, 4> embeds_v4{{
    {{{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, 96}, 12},        // IPv4-mapped ::ffff:a.b.c.d
    {{{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0}, 96}, 12},        // IPv4-translated ::ffff:0:a.b.c.d (SIIT)
    {{{0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0}, 96}, 12},  // NAT64 well-known prefix 64:ff9b::/96
    {{{0x20, 0x02}, 16}, 2},                                       // 6to4 2002:AABB:CCDD::/16
}};

std::array<std::uint8_t, 4> v4_at(const std::array<std::uint8_t, 16>& b, unsigned offset) {
  return {b[offset], b[offset + 1], b[offset + 2], b[offset + 3]};
}

}  // namespace

bool is_forbidden_address(const std::array<std::uint8_t, 4>& a) {
  return std::any_of(forbidden_v4.begin(), forbidden_v4.end(), [&](const auto& p) { return p.contains(a); });
}

bool is_forbidden_address(const std::array<std::uint8_t, 16>& b) {
  for (const embedding& e : embeds_v4)
    if (e.block.contains(b)) return is_forbidden_address(v4_at(b, e.v4_offset));
  return std::any_of(forbidden_v6.begin(), forbidden_v6.end(), [&](const auto& p) { return p.contains(b); });
}

}  // namespace kvr
