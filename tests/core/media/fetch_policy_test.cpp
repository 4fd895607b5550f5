#include "core/media/fetch_policy.hpp"

#include <gtest/gtest.h>

namespace kvr {
namespace {

TEST(fetch_policy, http_urls_parse_with_default_ports_and_other_schemes_are_refused) {
  auto url = parse_http_url("HTTP://images.example.com/cats/1.png?size=large#top");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->scheme, "http");
  EXPECT_EQ(url->host, "images.example.com");
  EXPECT_EQ(url->port, "80");
  EXPECT_EQ(url->target, "/cats/1.png?size=large");
  EXPECT_EQ(parse_http_url("https://[2001:db8::1]:8443")->port, "8443");
  EXPECT_EQ(parse_http_url("https://[2001:db8::1]:8443")->target, "/");
  EXPECT_EQ(parse_http_url("file:///etc/passwd").error(), "scheme file is not http or https");
  EXPECT_EQ(parse_http_url("gopher://x").error(), "scheme gopher is not http or https");
  EXPECT_EQ(parse_http_url("http://user:pw@host/").error(), "URLs with credentials are refused");
  EXPECT_FALSE(parse_http_url("http://host:99999/"));
}

TEST(fetch_policy, redirects_resolve_absolute_and_relative_locations) {
  const parsed_url base = *parse_http_url("http://a.example/img/x.png?v=1");
  EXPECT_EQ(resolve_location(base, "/other.png")->target, "/other.png");
  EXPECT_EQ(resolve_location(base, "y.png")->target, "/img/y.png");
  EXPECT_EQ(resolve_location(base, "https://b.example/z.png")->host, "b.example");
  EXPECT_EQ(resolve_location(base, "//c.example/w.png")->host, "c.example");
}

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
