#pragma once
/// The API keys a router accepts (`Authorization: Bearer KEY`). Only their SHA-256 digests are
/// kept, and a presented key is compared with every one of them in constant time (no early
/// exit, no length leak): a client learns nothing from how long a refusal takes.

#include <array>
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

namespace kvr {

class api_key_set {
 public:
  api_key_set() = default;
  explicit api_key_set(const std::vector<std::string>& keys);

  /// One key per line; blank lines and lines starting with `#` are skipped, surrounding spaces
  /// (and a CR) trimmed. An error names the line of a key that is not visible ASCII.
  [[nodiscard]] static std::expected<api_key_set, std::string> from_lines(std::string_view text);

  /// Adds `other`'s keys to these.
  void add(const api_key_set& other) { digests_.insert(digests_.end(), other.digests_.begin(), other.digests_.end()); }

  /// Whether `presented` is one of the keys.
  [[nodiscard]] bool accepts(std::string_view presented) const;

  [[nodiscard]] std::size_t size() const { return digests_.size(); }
  [[nodiscard]] bool empty() const { return digests_.empty(); }

 private:
  using digest = std::array<std::uint8_t, 32>;
  std::vector<digest> digests_;
};

/// The key of an `Authorization` header value (`Bearer KEY`, the scheme case-insensitive);
/// empty when it is another scheme or none.
[[nodiscard]] std::string_view bearer_token(std::string_view authorization);

}  // namespace kvr
