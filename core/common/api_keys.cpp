#include "core/common/api_keys.hpp"

#include <algorithm>
#include <cctype>

#include <openssl/crypto.h>
#include <openssl/sha.h>

namespace kvr {
namespace {

std::array<std::uint8_t, 32> sha256(std::string_view text) {
  std::array<std::uint8_t, 32> out{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), out.data());
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

api_key_set::api_key_set(const std::vector<std::string>& keys) {
  for (const std::string& key : keys) digests_.push_back(sha256(key));
}

std::expected<api_key_set, std::string> api_key_set::from_lines(std::string_view text) {
  std::vector<std::string> keys;
  std::size_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    const std::size_t end = text.find('\n');
    const std::string_view line = trim(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    if (line.empty() || line.front() == '#') continue;
    if (!std::all_of(line.begin(), line.end(), [](char c) { return c > 0x20 && c < 0x7f; }))
      return std::unexpected("line " + std::to_string(line_number) + ": a key is visible ASCII without spaces");
    keys.emplace_back(line);
  }
  return api_key_set(keys);
}

bool api_key_set::accepts(std::string_view presented) const {
  const digest given = sha256(presented);
  int matches = 0;
  for (const digest& key : digests_) matches |= CRYPTO_memcmp(key.data(), given.data(), given.size()) == 0;
  return matches != 0;
}

std::string_view bearer_token(std::string_view authorization) {
  authorization = trim(authorization);
  constexpr std::string_view scheme = "bearer ";
  if (authorization.size() <= scheme.size() ||
      !std::equal(scheme.begin(), scheme.end(), authorization.begin(),
                  [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); }))
    return {};
  return trim(authorization.substr(scheme.size()));
}

}  // namespace kvr
