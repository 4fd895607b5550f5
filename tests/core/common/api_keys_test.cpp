#include "core/common/api_keys.hpp"

#include <gtest/gtest.h>

namespace kvr {
namespace {

TEST(api_keys, accepts_exactly_the_keys_it_was_given) {
  const api_key_set keys({"sk-alpha", "sk-beta"});
  EXPECT_TRUE(keys.accepts("sk-alpha"));
  EXPECT_TRUE(keys.accepts("sk-beta"));
  EXPECT_FALSE(keys.accepts("sk-alph"));
  EXPECT_FALSE(keys.accepts("sk-alphaa"));
  EXPECT_FALSE(keys.accepts(""));
  EXPECT_FALSE(api_key_set().accepts("sk-alpha")) << "no key: nothing is accepted";
}

TEST(api_keys, reads_one_key_per_line_skipping_blanks_and_comments) {
  auto keys = api_key_set::from_lines("# team a\nsk-one\r\n\n   sk-two  \n# sk-three\n");
  ASSERT_TRUE(keys);
  EXPECT_EQ(keys->size(), 2u);
  EXPECT_TRUE(keys->accepts("sk-one"));
  EXPECT_TRUE(keys->accepts("sk-two"));
  EXPECT_FALSE(keys->accepts("sk-three"));
  EXPECT_FALSE(keys->accepts("# team a"));
  EXPECT_EQ(api_key_set::from_lines("ok\nsk one\n").error(), "line 2: a key is visible ASCII without spaces");
  EXPECT_TRUE(api_key_set::from_lines("")->empty());
}

TEST(api_keys, takes_the_key_of_a_bearer_authorization_only) {
  EXPECT_EQ(bearer_token("Bearer sk-x"), "sk-x");
  EXPECT_EQ(bearer_token("bearer   sk-x "), "sk-x");
  EXPECT_EQ(bearer_token("BEARER sk-x"), "sk-x");
  EXPECT_EQ(bearer_token("Basic dXNlcjpwYXNz"), "");
  EXPECT_EQ(bearer_token("Bearer"), "");
  EXPECT_EQ(bearer_token("Bearer "), "");
  EXPECT_EQ(bearer_token(""), "");
}

}  // namespace
}  // namespace kvr
