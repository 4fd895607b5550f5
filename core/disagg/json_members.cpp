#include "core/disagg/json_members.hpp"

#include <vector>

#include <nlohmann/json.hpp>

namespace kvr {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/// One top-level member: its key as written (quotes included) and the spans of the member and
/// of its value.
struct member {
  std::string_view raw_key;
  std::size_t begin = 0;        ///< the key's opening quote
  std::size_t value_begin = 0;
  std::size_t end = 0;          ///< one past the value
};

class scanner {
 public:
  scanner(std::string_view text, std::size_t max_depth) : text_(text), max_depth_(max_depth) {}

  /// The members of the object `text_` holds, or why it holds none.
  std::expected<std::vector<member>, std::string> members() {
    std::vector<member> out;
    skip_space();
    if (!take('{')) return fail("the body is not a JSON object");
    skip_space();
    if (take('}')) return finish(std::move(out));
    for (;;) {
      skip_space();
      member m;
      m.begin = at_;
      if (!skip_string()) return fail("a member's key is not a string");
      m.raw_key = text_.substr(m.begin, at_ - m.begin);
      skip_space();
      if (!take(':')) return fail("a member lacks its ':'");
      skip_space();
      m.value_begin = at_;
      if (auto skipped = skip_value(1); !skipped) return std::unexpected(skipped.error());
      m.end = at_;
      out.push_back(m);
      skip_space();
      if (take(',')) continue;
      if (take('}')) return finish(std::move(out));
      return fail("members are not separated by ','");
    }
  }

 private:
  std::expected<std::vector<member>, std::string> finish(std::vector<member> out) {
    skip_space();
    if (at_ != text_.size()) return fail("the object is followed by more content");
    return out;
  }
  static std::unexpected<std::string> fail(std::string why) { return std::unexpected(std::move(why)); }
  void skip_space() {
    while (at_ < text_.size() && is_space(text_[at_])) ++at_;
  }
  bool take(char c) {
    if (at_ >= text_.size() || text_[at_] != c) return false;
    ++at_;
    return true;
  }
  bool skip_string() {
    if (!take('"')) return false;
    while (at_ < text_.size()) {
      const char c = text_[at_++];
      if (c == '\\') {
        if (at_ >= text_.size()) return false;
        ++at_;
      } else if (c == '"') {
        return true;
      }
    }
    return false;
  }
  /// A value at nesting `depth`: strings and brackets are matched; scalars run to the next
  /// delimiter (the parser that reads the result judges them).
  std::expected<void, std::string> skip_value(std::size_t depth) {
    if (at_ >= text_.size()) return fail("a value is missing");
    const char c = text_[at_];
    if (c == '"') {
      if (!skip_string()) return fail("a string is not terminated");
      return {};
    }
    if (c == '{' || c == '[') {
      if (depth >= max_depth_) return fail("the body nests too deeply");
      const char close = c == '{' ? '}' : ']';
      ++at_;
      skip_space();
      if (take(close)) return {};
      for (;;) {
        skip_space();
        if (c == '{') {
          if (!skip_string()) return fail("a member's key is not a string");
          skip_space();
          if (!take(':')) return fail("a member lacks its ':'");
          skip_space();
        }
        if (auto inner = skip_value(depth + 1); !inner) return inner;
        skip_space();
        if (take(',')) continue;
        if (take(close)) return {};
        return fail("an array or object is not terminated");
      }
    }
    const std::size_t start = at_;
    while (at_ < text_.size() && !is_space(text_[at_]) && text_[at_] != ',' && text_[at_] != '}' && text_[at_] != ']') ++at_;
    if (at_ == start) return fail("a value is missing");
    return {};
  }

  std::string_view text_;
  std::size_t max_depth_;
  std::size_t at_ = 0;
};

/// The key a raw (quoted) key spells: escapes decoded where it has any.
std::string key_of(std::string_view raw_key) {
  if (raw_key.find('\\') == std::string_view::npos) return std::string(raw_key.substr(1, raw_key.size() - 2));
  const auto decoded = nlohmann::json::parse(raw_key, nullptr, false);
  return decoded.is_string() ? decoded.get<std::string>() : std::string(raw_key);
}

void append_member(std::string& out, bool& first, std::string_view key, std::string_view value) {
  if (!first) out += ',';
  first = false;
  out += nlohmann::json(std::string(key)).dump();
  out += ':';
  out += value;
}

}  // namespace

std::expected<std::string, std::string> edit_members(std::string_view object, std::span<const member_edit> edits,
                                                     std::size_t max_depth) {
  auto members = scanner(object, max_depth).members();
  if (!members) return std::unexpected(members.error());
  std::vector<bool> done(edits.size(), false);
  std::string out;
  out.reserve(object.size() + 128);
  out += '{';
  bool first = true;
  for (const member& m : *members) {
    const std::string key = key_of(m.raw_key);
    std::size_t e = 0;
    while (e < edits.size() && edits[e].key != key) ++e;
    if (e == edits.size()) {
      if (!first) out += ',';
      first = false;
      out.append(object.substr(m.begin, m.end - m.begin));
      continue;
    }
    if (!edits[e].json_value || done[e]) continue;  // removed, or set at its first place already
    done[e] = true;
    append_member(out, first, key, *edits[e].json_value);
  }
  for (std::size_t e = 0; e < edits.size(); ++e)
    if (edits[e].json_value && !done[e] && !edits[e].only_if_present) append_member(out, first, edits[e].key, *edits[e].json_value);
  out += '}';
  return out;
}

std::optional<std::string_view> member_value(std::string_view object, std::string_view key, std::size_t max_depth) {
  auto members = scanner(object, max_depth).members();
  if (!members) return std::nullopt;
  std::optional<std::string_view> value;
  for (const member& m : *members)
    if (key_of(m.raw_key) == key) value = object.substr(m.value_begin, m.end - m.value_begin);
  return value;
}

}  // namespace kvr
