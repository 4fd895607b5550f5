#include "core/replica/peer_subjects.hpp"

#include <gtest/gtest.h>

namespace kvr {
namespace {

TEST(peer_subjects, a_plain_set_name_is_its_own_token) {
  EXPECT_EQ(peer_subject("kvrouter", "qwen-3_a", peer_channel::bookings), "kvrouter.qwen-3_a.bookings");
  EXPECT_EQ(peer_subject("prod.kvr", "s", peer_channel::snapshot), "prod.kvr.s.snapshot");
}

TEST(peer_subjects, dots_wildcards_spaces_and_slashes_in_a_name_are_escaped_so_names_stay_distinct) {
  EXPECT_EQ(subject_token("Qwen/Qwen3 0.6B"), "Qwen%2FQwen3%200%2E6B");
  EXPECT_EQ(subject_token("a*>"), "a%2A%3E");
  EXPECT_NE(subject_token("a.b"), subject_token("a_b"));
  EXPECT_NE(subject_token("a%2Eb"), subject_token("a.b"));  // '%' itself is escaped
  EXPECT_EQ(subject_token(""), "%");
}

TEST(peer_subjects, a_received_subject_splits_into_its_set_token_and_channel) {
  const auto parsed = parse_peer_subject("prod.kvr", peer_subject("prod.kvr", "Qwen/Qwen3", peer_channel::snapshot));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->set_token, subject_token("Qwen/Qwen3"));
  EXPECT_EQ(parsed->channel, peer_channel::snapshot);
}

TEST(peer_subjects, subjects_of_other_shapes_are_not_peer_subjects) {
  for (const char* subject : {"kvrouter", "kvrouter.", "kvrouter.set", "kvrouter.set.other", "kvrouter..bookings",
                              "other.set.bookings", "kvrouterx.set.bookings"})
    EXPECT_FALSE(parse_peer_subject("kvrouter", subject)) << subject;
}

TEST(peer_subjects, a_prefix_must_be_tokens_without_wildcards_or_spaces) {
  EXPECT_FALSE(invalid_subject_prefix("kvrouter"));
  EXPECT_FALSE(invalid_subject_prefix("prod.kvrouter"));
  for (const char* bad : {"", ".kvr", "kvr.", "a..b", "a b", "a.*", "a.>"}) EXPECT_TRUE(invalid_subject_prefix(bad)) << bad;
}

}  // namespace
}  // namespace kvr
