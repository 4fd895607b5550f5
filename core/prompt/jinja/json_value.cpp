#include "core/prompt/jinja/json_value.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_set>
#include <vector>
#include <utility>

#include <simdjson.h>

#include "core/prompt/jinja/utf8.hpp"

namespace kvr::jinja {
namespace {

/// Thrown inside the reader only, caught at its entry: the text is not JSON.
struct malformed {};
/// Thrown inside the reader only, caught at its entry: the budget is spent.
struct over_budget {};

/// What the reader charges for each thing it builds: a list's or an object's storage as it
/// grows (grown by doubling, here, so what is charged is what is allocated), a container's
/// shared control block and header, a string's heap when it is too long to be held inside its
/// std::string, and a large object's hash index.
constexpr std::size_t charge_container = 64;
constexpr std::size_t charge_index_entry = 32;
constexpr std::size_t inline_string_bytes = 15;

/// Objects up to this many members find a repeated key by a scan; larger ones by hashing.
constexpr std::size_t scanned_object_members = 16;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

using members_t = decltype(dict::items);

/// Members by key, as positions in the object's items (stable as the vector grows, where a
/// short key's characters, stored inside its std::string, are not); looked up by a key's text.
struct member_hash {
  using is_transparent = void;
  const members_t* items;
  std::size_t operator()(std::size_t i) const { return std::hash<std::string_view>{}((*items)[i].first); }
  std::size_t operator()(std::string_view key) const { return std::hash<std::string_view>{}(key); }
};
struct member_equal {
  using is_transparent = void;
  const members_t* items;
  std::string_view key_of(std::size_t i) const { return (*items)[i].first; }
  bool operator()(std::size_t a, std::size_t b) const { return a == b; }
  bool operator()(std::string_view a, std::size_t b) const { return a == key_of(b); }
  bool operator()(std::size_t a, std::string_view b) const { return key_of(a) == b; }
};
using member_index = std::unordered_set<std::size_t, member_hash, member_equal>;

/// A recursive-descent reader over text whose nesting the shape scan bounded, so its recursion
/// is at most `max_depth` frames deep (checked again here, for the reader's own sake).
class json_text_reader {
 public:
  json_text_reader(std::string_view text, std::size_t max_depth, value_budget* budget)
      : text_(text), max_depth_(max_depth), budget_(budget) {}

  value read_document() {
    value v = read_value(0);
    skip_space();
    if (at_ != text_.size()) throw malformed{};
    charge(sizeof(value));
    return v;
  }

 private:
  value read_value(std::size_t level) {
    skip_space();
    if (at_ >= text_.size()) throw malformed{};
    switch (text_[at_]) {
      case '{': return read_object(level + 1);
      case '[': return read_array(level + 1);
      case '"': return value(read_string());
      case 't': expect_word("true"); return value(true);
      case 'f': expect_word("false"); return value(false);
      case 'n': expect_word("null"); return value(none_t{});
      default: return read_number();
    }
  }

  value read_array(std::size_t level) {
    if (level > max_depth_) throw malformed{};
    ++at_;  // '['
    charge(charge_container);
    list items;
    skip_space();
    if (peek() == ']') {
      ++at_;
      return value(std::move(items));
    }
    for (;;) {
      grow_for_one_more(items);
      items.push_back(read_value(level));
      skip_space();
      const char c = take();
      if (c == ']') return value(std::move(items));
      if (c != ',') throw malformed{};
    }
  }

  value read_object(std::size_t level) {
    if (level > max_depth_) throw malformed{};
    ++at_;  // '{'
    charge(charge_container);
    dict members;
    skip_space();
    if (peek() == '}') {
      ++at_;
      return value(std::move(members));
    }
    member_index index(0, member_hash{&members.items}, member_equal{&members.items});  // once it is large
    for (;;) {
      skip_space();
      if (peek() != '"') throw malformed{};
      std::string key = read_string();
      grow_for_one_more(members.items);
      if (members.items.size() >= scanned_object_members) charge(charge_index_entry);
      skip_space();
      if (take() != ':') throw malformed{};
      value item = read_value(level);
      add_member(members, index, std::move(key), std::move(item));
      skip_space();
      const char c = take();
      if (c == '}') return value(std::move(members));
      if (c != ',') throw malformed{};
    }
  }

  /// A repeated key keeps its first place and takes the last value, as json.loads and
  /// ordered_json do.
  static void add_member(dict& members, member_index& index, std::string key, value item) {
    auto& items = members.items;
    if (items.size() < scanned_object_members) {
      for (auto& [existing_key, existing] : items)
        if (existing_key == key) {
          existing = std::move(item);
          return;
        }
      items.emplace_back(std::move(key), std::move(item));
      return;
    }
    if (index.empty())
      for (std::size_t i = 0; i < items.size(); ++i) index.insert(i);
    if (const auto found = index.find(std::string_view(key)); found != index.end()) {
      items[*found].second = std::move(item);
      return;
    }
    items.emplace_back(std::move(key), std::move(item));
    index.insert(items.size() - 1);
  }

  std::string read_string() {
    ++at_;  // '"'
    std::string out;
    for (;;) {
      const std::size_t start = at_;
      skip_plain_words();
      while (at_ < text_.size()) {
        const auto c = static_cast<unsigned char>(text_[at_]);
        if (c == '"' || c == '\\' || c < 0x20) break;
        ++at_;
      }
      out.append(text_.data() + start, at_ - start);
      if (at_ >= text_.size()) throw malformed{};
      const char c = text_[at_++];
      if (c == '"') {
        if (out.size() > inline_string_bytes) charge(out.size());
        return out;
      }
      if (c != '\\') throw malformed{};  // a raw control character
      read_escape(out);
    }
  }

  /// Steps over eight bytes at a time while none is a quote, a backslash or a control
  /// character (prose is mostly such stretches); the byte loop after it finds which one is.
  void skip_plain_words() {
    constexpr std::uint64_t ones = 0x0101010101010101ULL;
    constexpr std::uint64_t highs = 0x8080808080808080ULL;
    auto holds_zero = [](std::uint64_t w) { return (w - ones) & ~w & highs; };
    while (text_.size() - at_ >= 8) {
      std::uint64_t word;
      std::memcpy(&word, text_.data() + at_, 8);
      const std::uint64_t below_space = (word - ones * 0x20) & ~word & highs;
      if (below_space | holds_zero(word ^ (ones * '"')) | holds_zero(word ^ (ones * '\\'))) return;
      at_ += 8;
    }
  }

  void read_escape(std::string& out) {
    switch (take()) {
      case '"': out += '"'; return;
      case '\\': out += '\\'; return;
      case '/': out += '/'; return;
      case 'b': out += '\b'; return;
      case 'f': out += '\f'; return;
      case 'n': out += '\n'; return;
      case 'r': out += '\r'; return;
      case 't': out += '\t'; return;
      case 'u': break;
      default: throw malformed{};
    }
    std::uint32_t code_point = read_hex4();
    if (code_point >= 0xDC00 && code_point <= 0xDFFF) throw malformed{};  // a low surrogate alone
    if (code_point >= 0xD800 && code_point <= 0xDBFF) {
      if (take() != '\\' || take() != 'u') throw malformed{};
      const std::uint32_t low = read_hex4();
      if (low < 0xDC00 || low > 0xDFFF) throw malformed{};
      code_point = 0x10000 + ((code_point - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(out, code_point);
  }

  std::uint32_t read_hex4() {
    if (text_.size() - at_ < 4) throw malformed{};
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const int digit = hex_digit(text_[at_++]);
      if (digit < 0) throw malformed{};
      v = v * 16 + static_cast<std::uint32_t>(digit);
    }
    return v;
  }

  /// JSON's number grammar, then the value: an int if it is integral and fits 64 signed bits.
  value read_number() {
    const std::size_t start = at_;
    if (peek() == '-') ++at_;
    if (peek() == '0') {
      ++at_;
    } else if (is_digit(peek())) {
      while (is_digit(peek())) ++at_;
    } else {
      throw malformed{};
    }
    bool integral = true;
    if (peek() == '.') {
      integral = false;
      ++at_;
      if (!is_digit(peek())) throw malformed{};
      while (is_digit(peek())) ++at_;
    }
    if (peek() == 'e' || peek() == 'E') {
      integral = false;
      ++at_;
      if (peek() == '+' || peek() == '-') ++at_;
      if (!is_digit(peek())) throw malformed{};
      while (is_digit(peek())) ++at_;
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + at_;
    if (integral) {
      std::int64_t i = 0;
      if (const auto [end, error] = std::from_chars(first, last, i); error == std::errc() && end == last) return value(i);
    }
    double d = 0;
    const auto [end, error] = std::from_chars(first, last, d);
    if (error == std::errc() && end == last) return value(d);
    if (error != std::errc::result_out_of_range) throw malformed{};
    if (too_small_for_a_double(std::string_view(first, static_cast<std::size_t>(last - first)))) return value(*first == '-' ? -0.0 : 0.0);
    throw malformed{};  // too large: not a finite double
  }

  /// Whether a number from_chars found out of range is so close to zero that it reads as 0
  /// (rather than so large it is infinite): its first significant digit's decimal place.
  static bool too_small_for_a_double(std::string_view number) {
    std::int64_t place = 0;  // the power of ten of the first non-zero digit, plus one
    std::size_t i = number.front() == '-' ? 1 : 0;
    bool seen_digit = false;
    std::int64_t integer_digits = 0;
    for (; i < number.size() && is_digit(number[i]); ++i)
      if (seen_digit || number[i] != '0') {
        seen_digit = true;
        ++integer_digits;
      }
    place = integer_digits;
    if (i < number.size() && number[i] == '.') {
      for (++i; i < number.size() && is_digit(number[i]); ++i) {
        if (seen_digit) continue;
        if (number[i] != '0') seen_digit = true;
        else --place;
      }
    }
    if (!seen_digit) return true;  // all zeros: from_chars does not find those out of range
    if (i < number.size() && (number[i] == 'e' || number[i] == 'E')) {
      ++i;
      const bool negative = number[i] == '-';
      if (number[i] == '+' || number[i] == '-') ++i;
      std::int64_t exponent = 0;
      for (; i < number.size(); ++i) exponent = std::min<std::int64_t>(exponent * 10 + (number[i] - '0'), 1'000'000'000);
      place += negative ? -exponent : exponent;
    }
    return place < 0;
  }

  /// Makes room for one more item in `items`, doubling its storage when it is full, charged
  /// before it is allocated (while the old storage is copied, both are held: 1.5x the charge).
  template <class Vector>
  void grow_for_one_more(Vector& items) {
    if (items.size() < items.capacity()) return;
    const std::size_t capacity = std::max<std::size_t>(1, 2 * items.capacity());
    charge((capacity - items.capacity()) * sizeof(typename Vector::value_type));
    items.reserve(capacity);
  }

  void charge(std::size_t bytes) {
    if (budget_ == nullptr) return;
    if (budget_->bytes_left < bytes) {
      budget_->bytes_left = 0;
      throw over_budget{};
    }
    budget_->bytes_left -= bytes;
  }

  void expect_word(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) throw malformed{};
    at_ += word.size();
  }

  void skip_space() {
    while (at_ < text_.size() && is_space(text_[at_])) ++at_;
  }
  [[nodiscard]] char peek() const { return at_ < text_.size() ? text_[at_] : '\0'; }
  char take() {
    if (at_ >= text_.size()) throw malformed{};
    return text_[at_++];
  }

  std::string_view text_;
  std::size_t at_ = 0;
  std::size_t max_depth_;
  value_budget* budget_;
};

}  // namespace

std::expected<value, json_parse_error> value_from_json_text(std::string_view text, std::size_t max_depth,
                                                            value_budget* budget) {
  if (auto shape = scan_json_shape(text, max_depth); !shape)
    return std::unexpected(shape.error() == json_shape_error::too_deep ? json_parse_error::too_deep : json_parse_error::not_json);
  // Outside strings JSON is ASCII, so the whole text is valid UTF-8 exactly when every string is.
  if (!simdjson::validate_utf8(text.data(), text.size())) return std::unexpected(json_parse_error::not_json);
  try {
    return json_text_reader(text, max_depth, budget).read_document();
  } catch (const malformed&) {
    return std::unexpected(json_parse_error::not_json);
  } catch (const over_budget&) {
    return std::unexpected(json_parse_error::too_large);
  }
}

}  // namespace kvr::jinja
