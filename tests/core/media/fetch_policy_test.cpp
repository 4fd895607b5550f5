#include "core/media/fetch_policy.hpp"

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

}  // namespace
}  // namespace kvr
