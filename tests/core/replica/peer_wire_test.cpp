#include "core/replica/peer_wire.hpp"

#include <gtest/gtest.h>

#include <msgpack.hpp>

namespace kvr {
namespace {

std::span<const std::uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

peer_origin origin(std::uint64_t sequence) {
  return {.replica = "r1", .incarnation = 77, .sequence = sequence, .sent_unix_ns = 1'700'000'000'000'000'000};
}

/// Packs `fields` as one msgpack array (for hand-made, malformed messages).
template <class... Fields>
std::string packed(const Fields&... fields) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> pk(buffer);
  pk.pack_array(sizeof...(Fields));
  (pk.pack(fields), ...);
  return {buffer.data(), buffer.size()};
}

TEST(peer_wire, a_bookings_message_survives_encoding_and_decoding) {
  peer_bookings_message message{.origin = origin(5), .events = {}};
  message.events.push_back({.what = peer_event::kind::booked, .request_id = 0xfedcba9876543210ull, .worker = "http://10.0.0.5:8000",
                            .prompt_tokens = 4096, .overlap_blocks = 12, .sequence_hashes = {1, 0xffffffffffffffffull, 300}});
  message.events.push_back({.what = peer_event::kind::first_token, .request_id = 3});
  message.events.push_back({.what = peer_event::kind::finished, .request_id = 3});
  const auto decoded = decode_peer_message(bytes_of(encode_peer_message(message)));
  ASSERT_TRUE(decoded) << decoded.error();
  ASSERT_TRUE(std::holds_alternative<peer_bookings_message>(*decoded));
  EXPECT_EQ(std::get<peer_bookings_message>(*decoded), message);
}

TEST(peer_wire, a_snapshot_part_survives_encoding_and_decoding) {
  peer_snapshot_message message{.origin = origin(9), .part = 1, .parts = 3, .bookings = {}};
  message.bookings.push_back({.request_id = 1, .worker = "w0", .prompt_tokens = 10, .overlap_blocks = 0, .prefilled = false});
  message.bookings.push_back({.request_id = 2, .worker = "w1", .prompt_tokens = 99, .overlap_blocks = 4, .prefilled = true});
  const auto decoded = decode_peer_message(bytes_of(encode_peer_message(message)));
  ASSERT_TRUE(decoded) << decoded.error();
  ASSERT_TRUE(std::holds_alternative<peer_snapshot_message>(*decoded));
  EXPECT_EQ(std::get<peer_snapshot_message>(*decoded), message);
}

TEST(peer_wire, a_message_of_another_version_is_refused_by_name) {
  const auto decoded = decode_peer_message(bytes_of(packed(2, 0, std::string("r1"), 1, 1, 0, std::vector<int>{})));
  ASSERT_FALSE(decoded);
  EXPECT_NE(decoded.error().find("version 2"), std::string::npos) << decoded.error();
}

struct malformed_case {
  const char* name;
  std::string payload;
  const char* says;
};

class peer_wire_refuses : public ::testing::TestWithParam<malformed_case> {};

TEST_P(peer_wire_refuses, a_malformed_message_with_an_error_that_names_the_field) {
  const auto decoded = decode_peer_message(bytes_of(GetParam().payload));
  ASSERT_FALSE(decoded);
  EXPECT_NE(decoded.error().find(GetParam().says), std::string::npos) << decoded.error();
}

INSTANTIATE_TEST_SUITE_P(
    cases, peer_wire_refuses,
    ::testing::Values(
        malformed_case{"empty", "", "not msgpack"},
        malformed_case{"not_an_array", packed(1).substr(1), "must be an array"},
        malformed_case{"truncated", packed(1, 0, std::string("r1"), 1, 1, 0).substr(0, 5), "not msgpack"},
        malformed_case{"unknown_kind", packed(1, 7, std::string("r1"), 1, 1, 0), "kind"},
        malformed_case{"empty_replica", packed(1, 0, std::string(""), 1, 1, 0, std::vector<int>{}), "replica"},
        malformed_case{"replica_too_long", packed(1, 0, std::string(300, 'r'), 1, 1, 0, std::vector<int>{}), "replica"},
        malformed_case{"negative_sequence", packed(1, 0, std::string("r1"), 1, -1, 0, std::vector<int>{}), "sequence"},
        malformed_case{"events_missing", packed(1, 0, std::string("r1"), 1, 1, 0), "events is missing"},
        malformed_case{"event_not_an_array", packed(1, 0, std::string("r1"), 1, 1, 0, std::vector<int>{4}), "event must be an array"},
        malformed_case{"event_kind_out_of_range",
                       packed(1, 0, std::string("r1"), 1, 1, 0, std::vector<std::vector<int>>{{3, 1}}), "kind"},
        malformed_case{"booked_without_worker",
                       packed(1, 0, std::string("r1"), 1, 1, 0, std::vector<std::vector<int>>{{0, 1}}), "worker is missing"},
        malformed_case{"prompt_tokens_over_32_bits",
                       packed(1, 0, std::string("r1"), 1, 1, 0,
                              std::vector<std::tuple<int, int, std::string, std::uint64_t, int, std::vector<int>>>{
                                  {0, 1, "w", 1ull << 33, 0, {}}}),
                       "prompt_tokens"},
        malformed_case{"hash_not_an_integer",
                       packed(1, 0, std::string("r1"), 1, 1, 0,
                              std::vector<std::tuple<int, int, std::string, int, int, std::vector<std::string>>>{
                                  {0, 1, "w", 16, 0, {"x"}}}),
                       "sequence_hashes"},
        malformed_case{"part_beyond_parts", packed(1, 1, std::string("r1"), 1, 5, 0, 3, 3, std::vector<int>{}), "part 3 of 3"},
        malformed_case{"zero_parts", packed(1, 1, std::string("r1"), 1, 5, 0, 0, 0, std::vector<int>{}), "part 0 of 0"},
        malformed_case{"prefilled_not_a_boolean",
                       packed(1, 1, std::string("r1"), 1, 5, 0, 0, 1,
                              std::vector<std::tuple<int, std::string, int, int, int>>{{1, "w", 1, 0, 1}}),
                       "prefilled"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(peer_wire, nesting_deeper_than_any_message_is_refused_before_reading) {
  std::string deep(100, '\x91');  // 100 nested one-element arrays
  deep += '\x01';
  EXPECT_FALSE(decode_peer_message(bytes_of(deep)));
}

TEST(peer_wire, a_declared_length_far_beyond_the_payload_is_an_error_not_an_allocation) {
  // [1, 0, "r1", 1, 1, 0, array32 of 2^32-1 events] with no events behind it.
  std::string payload = packed(1, 0, std::string("r1"), 1, 1, 0, std::vector<int>{});
  payload[0] = '\x97';
  payload.back() = '\xdd';
  payload += std::string("\xff\xff\xff\xff", 4);
  EXPECT_FALSE(decode_peer_message(bytes_of(payload)));
}

}  // namespace
}  // namespace kvr
