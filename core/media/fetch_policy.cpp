#include "core/media/fetch_policy.hpp"

#include <algorithm>

namespace kvr {

bool is_forbidden_address(const std::array<std::uint8_t, 4>& a) {
  return a[0] == 0 ||                                     // 0.0.0.0/8 ("this network")
         a[0] == 10 ||                                    // private
         a[0] == 127 ||                                   // loopback
         (a[0] == 100 && (a[1] & 0xC0) == 64) ||          // carrier-grade NAT 100.64/10
         (a[0] == 169 && a[1] == 254) ||                  // link-local (cloud metadata)
         (a[0] == 172 && (a[1] & 0xF0) == 16) ||          // private 172.16/12
         (a[0] == 192 && a[1] == 168) ||                  // private
         (a[0] == 192 && a[1] == 0 && a[2] == 0) ||       // IETF protocol assignments
         (a[0] == 198 && (a[1] & 0xFE) == 18) ||          // benchmarking 198.18/15
         a[0] >= 224;                                     // multicast, reserved, broadcast
}

bool is_forbidden_address(const std::array<std::uint8_t, 16>& b) {
  const bool zero_prefix = std::all_of(b.begin(), b.begin() + 10, [](std::uint8_t x) { return x == 0; });
  if (zero_prefix && b[10] == 0xff && b[11] == 0xff)  // IPv4-mapped: judge the IPv4 address
    return is_forbidden_address(std::array<std::uint8_t, 4>{b[12], b[13], b[14], b[15]});
  const bool all_zero_but_last = std::all_of(b.begin(), b.begin() + 15, [](std::uint8_t x) { return x == 0; });
  if (all_zero_but_last && (b[15] == 0 || b[15] == 1)) return true;  // :: and ::1
  return (b[0] & 0xFE) == 0xFC ||                   // unique local fc00::/7
         (b[0] == 0xFE && (b[1] & 0xC0) == 0x80) ||  // link-local fe80::/10
         b[0] == 0xFF ||                             // multicast
         (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) ||  // documentation
         (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b);    // NAT64 64:ff9b::/96
}

}  // namespace kvr
