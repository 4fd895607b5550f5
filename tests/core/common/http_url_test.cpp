#include "core/common/http_url.hpp"

#include <gtest/gtest.h>

namespace kvr {
namespace {

TEST(http_url, http_urls_parse_with_default_ports_and_other_schemes_are_refused) {
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

TEST(http_url, redirects_resolve_absolute_and_relative_locations) {
  const parsed_url base = *parse_http_url("http://a.example/img/x.png?v=1");
  EXPECT_EQ(resolve_location(base, "/other.png")->target, "/other.png");
  EXPECT_EQ(resolve_location(base, "y.png")->target, "/img/y.png");
  EXPECT_EQ(resolve_location(base, "https://b.example/z.png")->host, "b.example");
  EXPECT_EQ(resolve_location(base, "//c.example/w.png")->host, "c.example");
}

TEST(http_url, ipv6_literals_lose_their_brackets_in_the_host_and_keep_them_in_the_authority) {
  const auto url = parse_http_url("http://[::1]:8000/engine");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->port, "8000");
  EXPECT_EQ(url->target, "/engine");
  EXPECT_EQ(authority_of(*url), "[::1]:8000");
  EXPECT_EQ(authority_of(*parse_http_url("http://10.0.0.5")), "10.0.0.5:80");
}

TEST(http_url, ports_outside_one_to_65535_are_refused) {
  for (const char* bad : {"http://h:0/", "http://h:65536/", "http://h:99999/", "http://h:-1/", "http://h:8o/",
                          "http://[::1]:123456/"})
    EXPECT_FALSE(parse_http_url(bad)) << bad;
  EXPECT_EQ(parse_http_url("http://h:65535/")->port, "65535");
  EXPECT_EQ(parse_http_url("http://h:1")->port, "1");
}

}  // namespace
}  // namespace kvr

namespace kvr {
namespace {

TEST(query_parameter, finds_a_parameter_and_undoes_its_percent_encoding) {
  EXPECT_EQ(query_parameter("/ready?model=Qwen%2FQwen3-0.6B", "model"), "Qwen/Qwen3-0.6B");
  EXPECT_EQ(query_parameter("/ready?a=1&model=m+x&model=second", "model"), "m x");
  EXPECT_EQ(query_parameter("/ready?model=", "model"), "");
  EXPECT_EQ(query_parameter("/ready?model", "model"), "");
  EXPECT_EQ(query_parameter("/ready?model=m#frag", "model"), "m");
}

TEST(query_parameter, is_absent_without_the_name_and_refuses_bad_escapes) {
  EXPECT_EQ(query_parameter("/ready", "model"), std::nullopt);
  EXPECT_EQ(query_parameter("/ready?models=m", "model"), std::nullopt);
  EXPECT_EQ(query_parameter("/ready?model=%4", "model"), std::nullopt);
  EXPECT_EQ(query_parameter("/ready?model=%zz", "model"), std::nullopt);
  EXPECT_EQ(query_parameter("/ready?model=%", "model"), std::nullopt);
}

TEST(http_url, an_absolute_form_target_is_routed_by_its_path_and_query) {
  EXPECT_EQ(origin_form_target("http://router:8080/v1/chat/completions"), "/v1/chat/completions");
  EXPECT_EQ(origin_form_target("HTTPS://h/v1/completions?x=1"), "/v1/completions?x=1");
  EXPECT_EQ(origin_form_target("http://h"), "/");
  EXPECT_EQ(origin_form_target("/v1/models"), "/v1/models");
  for (const char* refused : {"*", "h:80", "http:///v1/chat/completions", "ftp://h/x", "http://h?q", "", "http:/"})
    EXPECT_FALSE(origin_form_target(refused)) << refused;
}

}  // namespace
}  // namespace kvr
