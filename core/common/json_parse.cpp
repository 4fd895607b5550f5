#include "core/common/json_parse.hpp"

#include <cstdint>
#include <string>

#include <simdjson.h>

namespace kvr {
namespace {

using ordered_json = nlohmann::ordered_json;

/// `element` into `out`.
void build(simdjson::dom::element element, ordered_json& out) {
  switch (element.type()) {
    case simdjson::dom::element_type::ARRAY: {
      out = ordered_json::array();
      for (simdjson::dom::element child : simdjson::dom::array(element)) {
        out.push_back(nullptr);
        build(child, out.back());
      }
      return;
    }
    case simdjson::dom::element_type::OBJECT: {
      out = ordered_json::object();
      for (simdjson::dom::key_value_pair member : simdjson::dom::object(element))
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

ordered_json parse_ordered_json(std::string_view text) {
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(text.data(), text.size(), true).get(root) == simdjson::SUCCESS) {
    ordered_json out;
    build(root, out);
    return out;
  }
  return ordered_json::parse(text, nullptr, false);
}

}  // namespace kvr
