#include "core/replica/peer_subjects.hpp"

#include <fmt/format.h>

namespace kvr {
namespace {

bool plain(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

std::string_view channel_name(peer_channel channel) { return channel == peer_channel::bookings ? "bookings" : "snapshot"; }

}  // namespace

std::optional<std::string> invalid_subject_prefix(std::string_view prefix) {
  if (prefix.empty()) return "the subject prefix is empty";
  std::size_t token = 0;
  for (char c : prefix) {
    if (c == '.') {
      if (token == 0) return fmt::format("the subject prefix \"{}\" has an empty token", prefix);
      token = 0;
      continue;
    }
    if (c <= ' ' || c > '~' || c == '*' || c == '>')
      return fmt::format("the subject prefix \"{}\" may hold printable ASCII only, without spaces, '*' or '>'", prefix);
    ++token;
  }
  if (token == 0) return fmt::format("the subject prefix \"{}\" has an empty token", prefix);
  return std::nullopt;
}

std::string subject_token(std::string_view set_name) {
  std::string out;
  out.reserve(set_name.size());
  for (char c : set_name) {
    if (plain(c)) out += c;
    else out += fmt::format("%{:02X}", static_cast<unsigned char>(c));
  }
  return out.empty() ? std::string("%") : out;  // "%" alone: the empty name (no other token is "%")
}

std::string peer_subject(std::string_view prefix, std::string_view set_name, peer_channel channel) {
  return fmt::format("{}.{}.{}", prefix, subject_token(set_name), channel_name(channel));
}

std::optional<parsed_peer_subject> parse_peer_subject(std::string_view prefix, std::string_view subject) {
  if (subject.size() <= prefix.size() + 1 || !subject.starts_with(prefix) || subject[prefix.size()] != '.') return std::nullopt;
  const std::string_view rest = subject.substr(prefix.size() + 1);
  const std::size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  const std::string_view channel = rest.substr(dot + 1);
  parsed_peer_subject parsed{.set_token = std::string(rest.substr(0, dot))};
  if (channel == "bookings") parsed.channel = peer_channel::bookings;
  else if (channel == "snapshot") parsed.channel = peer_channel::snapshot;
  else return std::nullopt;
  return parsed;
}

}  // namespace kvr
