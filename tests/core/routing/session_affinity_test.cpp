#include "core/routing/session_affinity.hpp"

#include <gtest/gtest.h>

namespace kvr {
namespace {

using namespace std::chrono_literals;
const time_point t0{};

TEST(session_bindings, a_binding_lives_until_it_expires_and_rebinding_counts_a_move) {
  session_bindings sessions;
  sessions.bind(7, 2, t0 + 10s);
  EXPECT_EQ(sessions.find(7, t0 + 9s), 2u);
  sessions.bind(7, 3, t0 + 20s);
  EXPECT_EQ(sessions.moves(), 1u);
  sessions.bind(7, 3, t0 + 30s);
  EXPECT_EQ(sessions.moves(), 1u) << "the same worker again is no move";
  EXPECT_EQ(sessions.find(7, t0 + 29s), 3u);
  EXPECT_FALSE(sessions.find(7, t0 + 30s));
  EXPECT_EQ(sessions.size(), 0u) << "an expired binding is dropped when found";
}

TEST(session_bindings, the_least_recently_used_binding_goes_when_full) {
  session_bindings sessions(2);
  sessions.bind(1, 0, t0 + 1h);
  sessions.bind(2, 1, t0 + 1h);
  sessions.bind(1, 0, t0 + 1h);  // 1 used again: 2 is now the oldest
  sessions.bind(3, 1, t0 + 1h);
  EXPECT_EQ(sessions.size(), 2u);
  EXPECT_TRUE(sessions.find(1, t0));
  EXPECT_FALSE(sessions.find(2, t0));
  EXPECT_TRUE(sessions.find(3, t0));
}

}  // namespace
}  // namespace kvr
