#include "core/common/json_parse.hpp"

#include <cstdint>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <simdjson.h>

namespace kvr {
namespace {

/// ordered_json finds a key by a scan (its map is a vector), so an object of n members built
/// key by key costs n^2 / 2 comparisons: 40 000 keys, seconds. Objects larger than this are
/// built another way (below).
constexpr std::size_t scanned_object_members = 16;

template <class Json>
void build(simdjson::dom::element element, Json& out);

/// A large object into an ordered_json in linear time: each key's last value at its first
/// place, found by hashing, then appended to the map's vector without its scan.
void build_large_ordered_object(const simdjson::dom::object& object, nlohmann::ordered_json& out) {
  std::vector<std::pair<std::string_view, simdjson::dom::element>> members;
  members.reserve(object.size());
  std::unordered_map<std::string_view, std::size_t> first_place;
  first_place.reserve(object.size());
  for (simdjson::dom::key_value_pair member : object) {
    const auto [place, added] = first_place.try_emplace(member.key, members.size());
    if (added) members.emplace_back(member.key, member.value);
    else members[place->second].second = member.value;
  }
  auto& map = out.get_ref<nlohmann::ordered_json::object_t&>();
  auto& items = static_cast<nlohmann::ordered_json::object_t::Container&>(map);
  items.reserve(members.size());
  for (const auto& [key, element] : members) {
    items.emplace_back(std::string(key), nullptr);
    build(element, items.back().second);
  }
}

/// `element` into `out`. Recursive, one frame per level: the caller bounded the depth.
template <class Json>
void build(simdjson::dom::element element, Json& out) {
  switch (element.type()) {
    case simdjson::dom::element_type::ARRAY: {
      out = Json::array();
      for (simdjson::dom::element child : simdjson::dom::array(element)) {
        out.push_back(nullptr);
        build(child, out.back());
      }
      return;
    }
    case simdjson::dom::element_type::OBJECT: {
      out = Json::object();
      const simdjson::dom::object object(element);
      if constexpr (std::is_same_v<Json, nlohmann::ordered_json>) {
        if (object.size() > scanned_object_members) {
          build_large_ordered_object(object, out);
          return;
        }
      }
      for (simdjson::dom::key_value_pair member : object)
        build(member.value, out[std::string(member.key)]);  // a repeated key: first place, last value
      return;
    }
    case simdjson::dom::element_type::INT64: {
      const std::int64_t value = std::int64_t(element);
      if (value >= 0) out = static_cast<std::uint64_t>(value);  // as nlohmann reads it
      else out = value;
      return;
    }
    case simdjson::dom::element_type::UINT64: out = std::uint64_t(element); return;
    case simdjson::dom::element_type::DOUBLE: out = double(element); return;
    case simdjson::dom::element_type::STRING: out = std::string(std::string_view(element)); return;
    case simdjson::dom::element_type::BOOL: out = bool(element); return;
    case simdjson::dom::element_type::NULL_VALUE: out = nullptr; return;
  }
}

}  // namespace

/// simdjson's parser keeps buffers of about 15 bytes per byte of the longest text it parsed
/// (render_memory_test: a 4 MB chat left 62 MB behind). A thread keeps them for texts up to
/// this size only, so that one large body does not pin hundreds of megabytes for good.
constexpr std::size_t kept_parser_capacity = std::size_t{1} << 20;

template <class Json>
std::expected<Json, json_parse_error> parse_json(std::string_view text, std::size_t max_depth) {
  if (auto shape = scan_json_shape(text, max_depth); !shape)
    return std::unexpected(shape.error() == json_shape_error::too_deep ? json_parse_error::too_deep : json_parse_error::not_json);
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(text.data(), text.size(), true).get(root) == simdjson::SUCCESS) {
    Json out;
    build(root, out);
    if (text.size() > kept_parser_capacity) parser = simdjson::dom::parser{};
    return out;
  }
  if (text.size() > kept_parser_capacity) parser = simdjson::dom::parser{};
  // nlohmann stops at a NUL byte as at the end of its input; JSON text never holds one raw.
  if (text.find('\0') != std::string_view::npos) return std::unexpected(json_parse_error::not_json);
  Json out = Json::parse(text, nullptr, false);
  if (out.is_discarded()) return std::unexpected(json_parse_error::not_json);
  return out;
}

template std::expected<nlohmann::json, json_parse_error> parse_json(std::string_view, std::size_t);
template std::expected<nlohmann::ordered_json, json_parse_error> parse_json(std::string_view, std::size_t);

nlohmann::ordered_json parse_ordered_json(std::string_view text) {
  auto parsed = parse_json<nlohmann::ordered_json>(text);
  return parsed ? std::move(*parsed) : nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
}

nlohmann::json parse_plain_json(std::string_view text) {
  auto parsed = parse_json<nlohmann::json>(text);
  return parsed ? std::move(*parsed) : nlohmann::json(nlohmann::json::value_t::discarded);
}

std::string describe(json_parse_error error, std::size_t max_depth) {
  switch (error) {
    case json_parse_error::not_json: return "is not valid JSON";
    case json_parse_error::too_deep: return fmt::format("nests deeper than {} levels", max_depth);
    case json_parse_error::too_large: return "holds more JSON values than this router reads for a body of its size";
  }
  return "is malformed";
}

}  // namespace kvr
