#pragma once
/// The NATS subjects replicas talk on: `PREFIX.SET.bookings` and `PREFIX.SET.snapshot`, one
/// pair per worker set. A set's name becomes one subject token: bytes other than letters,
/// digits, '-' and '_' are written %XX, so distinct names stay distinct subjects.

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

namespace kvr {

enum class peer_channel : std::uint8_t { bookings, snapshot };

/// Why `prefix` cannot start subjects; none when it can (dot-separated non-empty tokens of
/// printable ASCII other than the wildcards `*` and `>`).
[[nodiscard]] std::optional<std::string> invalid_subject_prefix(std::string_view prefix);

[[nodiscard]] std::string subject_token(std::string_view set_name);
[[nodiscard]] std::string peer_subject(std::string_view prefix, std::string_view set_name, peer_channel channel);

struct parsed_peer_subject {
  std::string set_token;  ///< as subject_token() wrote it
  peer_channel channel = peer_channel::bookings;
};
/// Splits a subject received under `prefix`; none when it is not one of the two shapes.
[[nodiscard]] std::optional<parsed_peer_subject> parse_peer_subject(std::string_view prefix, std::string_view subject);

}  // namespace kvr
