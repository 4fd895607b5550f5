#include "core/media/fetch_policy.hpp"

#include <arpa/inet.h>

#include <gtest/gtest.h>

namespace kvr {
namespace {

TEST(fetch_policy, loopback_private_link_local_and_multicast_addresses_are_forbidden) {
  using v4 = std::array<std::uint8_t, 4>;
  for (v4 a : {v4{127, 0, 0, 1}, v4{10, 1, 2, 3}, v4{172, 16, 0, 1}, v4{172, 31, 255, 255}, v4{192, 168, 1, 1},
               v4{169, 254, 169, 254}, v4{100, 64, 0, 1}, v4{0, 0, 0, 0}, v4{224, 0, 0, 1}, v4{255, 255, 255, 255}})
    EXPECT_TRUE(is_forbidden_address(a)) << int(a[0]) << "." << int(a[1]);
  for (v4 a : {v4{8, 8, 8, 8}, v4{172, 32, 0, 1}, v4{93, 184, 216, 34}, v4{100, 128, 0, 1}})
    EXPECT_FALSE(is_forbidden_address(a)) << int(a[0]) << "." << int(a[1]);
  using v6 = std::array<std::uint8_t, 16>;
  v6 loopback{};
  loopback[15] = 1;
  v6 mapped_private{};
  mapped_private[10] = mapped_private[11] = 0xff;
  mapped_private[12] = 192;
  mapped_private[13] = 168;
  v6 link_local{0xfe, 0x80};
  v6 unique_local{0xfd, 0x12};
  v6 global{0x26, 0x06, 0x47, 0x00};
  EXPECT_TRUE(is_forbidden_address(loopback));
  EXPECT_TRUE(is_forbidden_address(mapped_private));
  EXPECT_TRUE(is_forbidden_address(link_local));
  EXPECT_TRUE(is_forbidden_address(unique_local));
  EXPECT_FALSE(is_forbidden_address(global));
}

bool forbidden(const char* text) {
  std::array<std::uint8_t, 16> v6{};
  std::array<std::uint8_t, 4> v4{};
  if (inet_pton(AF_INET, text, v4.data()) == 1) return is_forbidden_address(v4);
  EXPECT_EQ(inet_pton(AF_INET6, text, v6.data()), 1) << text;
  return is_forbidden_address(v6);
}

struct address_case {
  const char* address;
  bool forbidden;
};

void PrintTo(const address_case& c, std::ostream* os) { *os << c.address; }

class special_purpose_addresses : public ::testing::TestWithParam<address_case> {};

TEST_P(special_purpose_addresses, are_refused_and_public_ones_allowed) {
  EXPECT_EQ(forbidden(GetParam().address), GetParam().forbidden) << GetParam().address;
}

// Every block of IANA's IPv4 and IPv6 special-purpose registries that is not globally
// reachable, the IPv6 forms that embed an IPv4 address (judged by it), and public neighbours.
INSTANTIATE_TEST_SUITE_P(
    iana_registries, special_purpose_addresses,
    ::testing::Values(
        address_case{"0.1.2.3", true}, address_case{"10.255.0.1", true}, address_case{"100.64.0.1", true},
        address_case{"100.127.255.254", true}, address_case{"100.128.0.1", false}, address_case{"127.0.0.1", true},
        address_case{"127.9.9.9", true}, address_case{"169.254.169.254", true}, address_case{"172.16.0.1", true},
        address_case{"172.31.255.255", true}, address_case{"172.32.0.1", false}, address_case{"192.0.0.8", true},
        address_case{"192.0.2.10", true}, address_case{"192.88.99.1", true}, address_case{"192.168.1.1", true},
        address_case{"198.18.0.1", true}, address_case{"198.19.255.255", true}, address_case{"198.20.0.1", false},
        address_case{"198.51.100.7", true}, address_case{"203.0.113.9", true}, address_case{"224.0.0.1", true},
        address_case{"239.255.255.250", true}, address_case{"240.0.0.1", true}, address_case{"255.255.255.255", true},
        address_case{"192.31.196.1", true}, address_case{"192.175.48.1", true}, address_case{"8.8.8.8", false},
        address_case{"1.1.1.1", false}, address_case{"93.184.216.34", false},
        // IPv6
        address_case{"::", true}, address_case{"::1", true}, address_case{"::127.0.0.1", true},
        address_case{"::8.8.8.8", true},  // IPv4-compatible: deprecated, refused whatever it embeds
        address_case{"::ffff:127.0.0.1", true}, address_case{"::ffff:10.0.0.1", true},
        address_case{"::ffff:8.8.8.8", false}, address_case{"::ffff:0:127.0.0.1", true},
        address_case{"::ffff:0:169.254.169.254", true}, address_case{"::ffff:0:8.8.8.8", false},
        address_case{"64:ff9b::127.0.0.1", true}, address_case{"64:ff9b::10.1.2.3", true},
        address_case{"64:ff9b::8.8.8.8", false}, address_case{"64:ff9b:1::1", true},
        address_case{"2002:7f00:1::1", true},        // 6to4 of 127.0.0.1
        address_case{"2002:a9fe:a9fe::1", true},     // 6to4 of 169.254.169.254
        address_case{"2002:808:808::1", false},      // 6to4 of 8.8.8.8
        address_case{"100::1", true}, address_case{"2001::1", true}, address_case{"2001:1ff::1", true},
        address_case{"2001:db8::1", true}, address_case{"3fff::1", true}, address_case{"5f00::1", true},
        address_case{"fc00::1", true}, address_case{"fd12:3456::1", true}, address_case{"fe80::1", true},
        address_case{"febf::1", true}, address_case{"fec0::1", true}, address_case{"ff02::1", true},
        address_case{"2606:4700:4700::1111", false}, address_case{"2a00:1450:4001::200e", false},
        address_case{"2001:4860:4860::8888", false}),
    [](const auto& info) { return "case_" + std::to_string(info.index); });

}  // namespace
}  // namespace kvr
