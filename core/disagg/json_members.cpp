#include "core/disagg/json_members.hpp"

#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/json_parse.hpp"
#include "core/common/json_top_level.hpp"

namespace kvr {
namespace {

/// One top-level member: its key as written (quotes included) and the spans of the member and
/// of its value.
struct member {
  std::string_view raw_key;
  std::size_t begin = 0;        ///< the key's opening quote
  std::size_t value_begin = 0;
  std::size_t end = 0;          ///< one past the value
};

/// The members of the object `text` holds (core/common/json_top_level), as spans of it.
std::expected<std::vector<member>, std::string> members_of(std::string_view text, std::size_t max_depth) {
  std::vector<json_member> found;
  if (auto scanned = scan_top_level_members(text, found, max_depth); !scanned) return std::unexpected(scanned.error());
  std::vector<member> out;
  out.reserve(found.size());
  for (const json_member& m : found) {
    const auto value_begin = static_cast<std::size_t>(m.value.data() - text.data());
    out.push_back({.raw_key = m.raw_key,
                   .begin = static_cast<std::size_t>(m.raw_key.data() - text.data()),
                   .value_begin = value_begin,
                   .end = value_begin + m.value.size()});
  }
  return out;
}

/// The key a raw (quoted) key spells: escapes decoded where it has any.
std::string key_of(std::string_view raw_key) {
  if (raw_key.find('\\') == std::string_view::npos) return std::string(raw_key.substr(1, raw_key.size() - 2));
  const auto decoded = parse_plain_json(raw_key);
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
  auto members = members_of(object, max_depth);
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
  auto members = members_of(object, max_depth);
  if (!members) return std::nullopt;
  std::optional<std::string_view> value;
  for (const member& m : *members)
    if (key_of(m.raw_key) == key) value = object.substr(m.value_begin, m.end - m.value_begin);
  return value;
}

}  // namespace kvr
