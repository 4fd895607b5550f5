#include "core/prompt/jinja/value.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/prompt/jinja/error.hpp"

namespace kvr::jinja {
namespace {

/// Every walk of a value recurses per level; values come from JSON bounded at `max_json_depth`
/// (kvrouter refuses deeper), but a template can build deeper ones (or a list that holds
/// itself), so each walk stops here with a render error rather than exhausting the stack.
void check_depth(int level) {
  if (level > max_value_depth) throw render_error("a value nests deeper than " + std::to_string(max_value_depth) + " levels");
}

}  // namespace

const value* dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void dict::set(std::string key, value v) {
  for (auto& [k, existing] : items)
    if (k == key) {
      existing = std::move(v);
      return;
    }
  items.emplace_back(std::move(key), std::move(v));
}

value value::from_json(const nlohmann::ordered_json& json) { return from_json_at(json, 0); }

value value::from_json_at(const nlohmann::ordered_json& json, int level) {
  check_depth(level);
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null: return value(none_t{});
    case nlohmann::ordered_json::value_t::boolean: return value(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return value(json.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return value(static_cast<std::int64_t>(json.get<std::uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: return value(json.get<double>());
    case nlohmann::ordered_json::value_t::string: return value(json.get_ref<const std::string&>());
    case nlohmann::ordered_json::value_t::array: {
      list items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(from_json_at(item, level + 1));
      return value(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      dict d;
      d.items.reserve(json.size());
      for (const auto& [key, item] : json.items()) d.set(key, from_json_at(item, level + 1));
      return value(std::move(d));
    }
    default: return value(none_t{});
  }
}

std::int64_t value::as_int() const {
  if (is_bool()) return as_bool() ? 1 : 0;
  return std::get<std::int64_t>(v_);
}

double value::as_double() const {
  if (is_float()) return std::get<double>(v_);
  return static_cast<double>(as_int());
}

bool value::truthy() const {
  return std::visit(
      [](const auto& x) -> bool {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, undefined_t> || std::is_same_v<T, none_t>) return false;
        else if constexpr (std::is_same_v<T, bool>) return x;
        else if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, double>) return x != 0;
        else if constexpr (std::is_same_v<T, std::string>) return !x.empty();
        else if constexpr (std::is_same_v<T, std::shared_ptr<list>>) return !x->empty();
        else if constexpr (std::is_same_v<T, std::shared_ptr<const std::string>>) return !x->empty();
        else return !x->items.empty() || x->is_namespace;
      },
      v_);
}

std::string_view value::type_name() const {
  switch (v_.index()) {
    case 0: return "Undefined";
    case 1: return "NoneType";
    case 2: return "bool";
    case 3: return "int";
    case 4: return "float";
    case 5: return "str";
    case 6: return "list";
    case 8: return "str";
    default: return is_dict() && as_dict().is_namespace ? "Namespace" : "dict";
  }
}

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), d, std::chars_format::scientific);
  std::string sci(buffer, end);  // e.g. "-1.2345e+02"
  const std::size_t e_at = sci.find('e');
  const int exponent = std::stoi(sci.substr(e_at + 1));
  std::string sign;
  std::string mantissa = sci.substr(0, e_at);
  if (mantissa[0] == '-') {
    sign = "-";
    mantissa.erase(0, 1);
  }
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  if (exponent < -4 || exponent >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp_text[16];
    std::snprintf(exp_text, sizeof(exp_text), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp_text;
  }
  std::string out = sign;
  if (exponent < 0) {
    out += "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
  } else {
    const auto integer_digits = static_cast<std::size_t>(exponent + 1);
    if (digits.size() <= integer_digits) {
      out += digits + std::string(integer_digits - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, integer_digits) + "." + digits.substr(integer_digits);
    }
  }
  return out;
}

namespace {

std::string python_string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(quote)) out += std::string("\\") + quote;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

void append_json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char hex[8];
          std::snprintf(hex, sizeof(hex), "\\u%04x", c);
          out += hex;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void append_json(std::string& out, const value& v, int indent, int level) {
  check_depth(level);
  auto newline = [&](int depth) {
    out += '\n';
    out.append(static_cast<std::size_t>(indent * depth), ' ');
  };
  if (v.is_undefined()) throw render_error("Object of type Undefined is not JSON serializable");
  if (v.is_none()) out += "null";
  else if (v.is_bool()) out += v.as_bool() ? "true" : "false";
  else if (v.is_int()) out += std::to_string(v.as_int());
  else if (v.is_float()) {
    const double d = v.as_double();
    out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : python_float_repr(d);
  } else if (v.is_string()) append_json_string(out, v.as_string());
  else if (v.is_list()) {
    const list& items = v.as_list();
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += indent >= 0 ? "," : ", ";
      if (indent >= 0) newline(level + 1);
      append_json(out, items[i], indent, level + 1);
    }
    if (indent >= 0) newline(level);
    out += ']';
  } else {
    const dict& d = v.as_dict();
    if (d.items.empty()) {
      out += "{}";
      return;
    }
    out += '{';
    for (std::size_t i = 0; i < d.items.size(); ++i) {
      if (i > 0) out += indent >= 0 ? "," : ", ";
      if (indent >= 0) newline(level + 1);
      append_json_string(out, d.items[i].first);
      out += ": ";
      append_json(out, d.items[i].second, indent, level + 1);
    }
    if (indent >= 0) newline(level);
    out += '}';
  }
}

}  // namespace

std::string to_json_text(const value& v, int indent) {
  std::string out;
  append_json(out, v, indent, 0);
  return out;
}

std::string value::str() const {
  if (is_undefined()) return {};
  if (is_string()) return as_string();
  return repr();
}

std::string value::repr() const { return repr_at(0); }

std::string value::repr_at(int level) const {
  check_depth(level);
  if (is_undefined()) return {};
  if (is_none()) return "None";
  if (is_bool()) return as_bool() ? "True" : "False";
  if (is_int()) return std::to_string(as_int());
  if (is_float()) return python_float_repr(as_double());
  if (is_string()) return python_string_repr(as_string());
  if (is_list()) {
    std::string out = "[";
    const list& items = as_list();
    for (std::size_t i = 0; i < items.size(); ++i) out += (i > 0 ? ", " : "") + items[i].repr_at(level + 1);
    return out + "]";
  }
  const dict& d = as_dict();
  std::string out = d.is_namespace ? "<Namespace {" : "{";
  for (std::size_t i = 0; i < d.items.size(); ++i)
    out += (i > 0 ? ", " : "") + python_string_repr(d.items[i].first) + ": " + d.items[i].second.repr_at(level + 1);
  return out + (d.is_namespace ? "}>" : "}");
}

bool value::equals(const value& other) const { return equals_at(other, 0); }

bool value::equals_at(const value& other, int level) const {
  check_depth(level);
  if (is_number() && other.is_number()) {
    if ((is_float() || other.is_float())) return as_double() == other.as_double();
    return as_int() == other.as_int();
  }
  if (v_.index() != other.v_.index()) return false;
  if (is_string()) return as_string() == other.as_string();
  if (is_list()) {
    const list& a = as_list();
    const list& b = other.as_list();
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!a[i].equals_at(b[i], level + 1)) return false;
    return true;
  }
  if (is_dict()) {
    const dict& a = as_dict();
    const dict& b = other.as_dict();
    if (&a == &b) return true;
    if (a.is_namespace || b.is_namespace || a.items.size() != b.items.size()) return false;
    for (const auto& [key, item] : a.items) {
      const value* theirs = b.find(key);
      if (theirs == nullptr || !item.equals_at(*theirs, level + 1)) return false;
    }
    return true;
  }
  return true;  // undefined == undefined, None == None
}

}  // namespace kvr::jinja
