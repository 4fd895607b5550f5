#include "core/prompt/jinja/builtins.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <vector>

#include "core/prompt/jinja/error.hpp"

namespace kvr::jinja {

namespace {

[[noreturn]] void fail(const std::string& what) { throw render_error(what); }

/// Refuses, before building it, a list of `items` past the bound.
void require_buildable_list(std::size_t items) {
  if (items > max_built_list_items)
    fail("a list of " + std::to_string(items) + " items would exceed the " + std::to_string(max_built_list_items) +
         " a template may build");
}

/// `count` copies of something of `size`, saturating rather than wrapping.
std::size_t repeated_size(std::size_t size, std::int64_t count) {
  if (count <= 0 || size == 0) return 0;
  const auto times = static_cast<std::uint64_t>(count);
  return times > SIZE_MAX / size ? SIZE_MAX : size * times;
}

/// Where each code point of a string starts, as Python indexes strings by code point: the byte
/// itself when the string is ASCII (no table: a prompt of megabytes sliced or indexed costs no
/// memory), else a table of byte offsets, one per code point plus the end.
class code_point_index {
 public:
  explicit code_point_index(const std::string& s) : bytes_(s.size()) {
    if (std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) return;
    starts_.reserve(static_cast<std::size_t>(
                        std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; })) +
                    1);
    for (std::size_t i = 0; i < s.size(); ++i)
      if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) starts_.push_back(i);
    starts_.push_back(s.size());
  }
  /// How many code points the string holds.
  [[nodiscard]] std::size_t size() const { return starts_.empty() ? bytes_ : starts_.size() - 1; }
  /// The byte where code point `i` starts (`size()`: the end).
  [[nodiscard]] std::size_t start(std::size_t i) const { return starts_.empty() ? i : starts_[i]; }

 private:
  std::size_t bytes_;
  std::vector<std::size_t> starts_;  ///< empty for ASCII
};

std::size_t code_point_count(const std::string& s) {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

bool is_python_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string strip_chars(const std::string& s, const value* chars, bool left, bool right) {
  auto strip = [&](char c) {
    if (chars == nullptr || chars->is_none()) return is_python_space(c);
    return chars->as_string().find(c) != std::string::npos;
  };
  std::size_t begin = 0;
  std::size_t end = s.size();
  if (left)
    while (begin < end && strip(s[begin])) ++begin;
  if (right)
    while (end > begin && strip(s[end - 1])) --end;
  return s.substr(begin, end - begin);
}

const std::string& require_string(const value& v, std::string_view what) {
  require_defined(v);
  if (!v.is_string()) fail(std::string(what) + " expects a string, not " + std::string(v.type_name()));
  return v.as_string();
}

const value* keyword(const keyword_args& keywords, std::string_view name) {
  for (const auto& [k, v] : keywords)
    if (k == name) return &v;
  return nullptr;
}

/// Positional argument `index`, else keyword `name`, else null.
const value* argument(const std::vector<value>& args, std::size_t index, const keyword_args& keywords,
                      std::string_view name) {
  if (index < args.size()) return &args[index];
  return keyword(keywords, name);
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, std::int64_t count) {
  if (from.empty()) {
    // Python inserts `to` between every code point (and at both ends).
    const code_point_index starts(s);
    require_buildable_string(s.size() + repeated_size(to.size(), static_cast<std::int64_t>(starts.size()) + 1));
    std::string out = to;
    for (std::size_t i = 0; i < starts.size(); ++i) out += s.substr(starts.start(i), starts.start(i + 1) - starts.start(i)) + to;
    return out;
  }
  std::string out;
  std::size_t position = 0;
  std::int64_t done = 0;
  while (count < 0 || done < count) {
    const std::size_t found = s.find(from, position);
    if (found == std::string::npos) break;
    out.append(s, position, found - position);
    out += to;
    require_buildable_string(out.size());
    position = found + from.size();
    ++done;
  }
  out.append(s, position);
  return out;
}

list split(const std::string& s, const value* separator, std::int64_t max_split) {
  list parts;
  if (separator == nullptr || separator->is_none()) {
    std::size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_python_space(s[i])) ++i;
      if (i >= s.size()) break;
      if (max_split >= 0 && static_cast<std::int64_t>(parts.size()) == max_split) {
        std::string rest = s.substr(i);
        while (!rest.empty() && is_python_space(rest.back())) rest.pop_back();
        parts.emplace_back(std::move(rest));
        break;
      }
      const std::size_t start = i;
      while (i < s.size() && !is_python_space(s[i])) ++i;
      parts.emplace_back(s.substr(start, i - start));
    }
    return parts;
  }
  const std::string& sep = separator->as_string();
  if (sep.empty()) fail("split: empty separator");
  std::size_t position = 0;
  while (max_split < 0 || static_cast<std::int64_t>(parts.size()) < max_split) {
    const std::size_t found = s.find(sep, position);
    if (found == std::string::npos) break;
    parts.emplace_back(s.substr(position, found - position));
    position = found + sep.size();
  }
  parts.emplace_back(s.substr(position));
  return parts;
}

std::string case_map(std::string s, bool upper) {
  for (char& c : s) c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string capitalize(const std::string& s) {
  std::string out = case_map(s, false);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string title(const std::string& s) {
  std::string out = s;
  bool previous_cased = false;
  for (char& c : out) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c)) != 0;
    if (alpha) c = static_cast<char>(previous_cased ? std::tolower(static_cast<unsigned char>(c)) : std::toupper(static_cast<unsigned char>(c)));
    previous_cased = alpha;
  }
  return out;
}

bool starts_or_ends(const std::string& s, const value& affix, bool at_start) {
  auto one = [&](const value& a) {
    const std::string& text = require_string(a, at_start ? "startswith" : "endswith");
    return at_start ? s.starts_with(text) : s.ends_with(text);
  };
  if (affix.is_list()) return std::any_of(affix.as_list().begin(), affix.as_list().end(), one);
  return one(affix);
}

std::int64_t length_of(const value& v) {
  require_defined(v);
  if (v.is_string()) return static_cast<std::int64_t>(code_point_count(v.as_string()));
  if (v.is_list()) return static_cast<std::int64_t>(v.as_list().size());
  if (v.is_dict()) return static_cast<std::int64_t>(v.as_dict().items.size());
  fail("object of type '" + std::string(v.type_name()) + "' has no len()");
}

int compare_values(const value& a, const value& b) {
  if (a.is_number() && b.is_number()) {
    const double x = a.as_double();
    const double y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.as_string().compare(b.as_string());
  fail("'<' not supported between '" + std::string(a.type_name()) + "' and '" + std::string(b.type_name()) + "'");
}

std::int64_t python_floor_div(std::int64_t a, std::int64_t b) {
  if (b == 0) fail("integer division or modulo by zero");
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

const std::set<std::string, std::less<>> filters = {
    "trim", "tojson", "length", "count", "default", "d", "upper", "lower", "replace", "join", "first", "last",
    "string", "int", "float", "list", "items", "capitalize", "title", "safe", "reverse", "selectattr",
    "rejectattr", "map", "abs", "escape", "e"};
const std::set<std::string, std::less<>> tests = {
    "defined", "undefined", "none", "string", "number", "integer", "float", "boolean", "true", "false",
    "mapping", "iterable", "sequence", "even", "odd", "divisibleby", "equalto", "eq", "==", "ne", "!=",
    "in", "lower", "upper"};

}  // namespace

void require_buildable_string(std::size_t bytes) {
  if (bytes > max_built_string_bytes)
    throw render_error("a string of " + std::to_string(bytes) + " bytes would exceed the " +
                       std::to_string(max_built_string_bytes >> 20) + " MiB a template may build");
}

void require_defined(const value& v) {
  if (v.is_undefined()) fail("'" + v.undefined_name() + "' is undefined");
}

bool is_known_filter(std::string_view name) { return filters.contains(name); }
bool is_known_test(std::string_view name) { return tests.contains(name); }

value attribute(const value& target, std::string_view name) {
  require_defined(target);
  if (target.is_dict()) {
    if (const value* found = target.as_dict().find(name)) return *found;
  }
  return value::undefined(std::string(name));
}

value subscript(const value& target, const value& key) {
  require_defined(target);
  if (target.is_dict()) {
    if (key.is_string()) return attribute(target, key.as_string());
    return value::undefined(key.str());
  }
  if ((target.is_list() || target.is_string()) && key.is_number() && !key.is_float()) {
    std::int64_t index = key.as_int();
    if (target.is_list()) {
      const auto size = static_cast<std::int64_t>(target.as_list().size());
      if (index < 0) index += size;
      if (index < 0 || index >= size) return value::undefined("[" + std::to_string(key.as_int()) + "]");
      return target.as_list()[static_cast<std::size_t>(index)];
    }
    const code_point_index starts(target.as_string());
    const auto size = static_cast<std::int64_t>(starts.size());
    if (index < 0) index += size;
    if (index < 0 || index >= size) return value::undefined("[" + std::to_string(key.as_int()) + "]");
    const auto i = static_cast<std::size_t>(index);
    return value(target.as_string().substr(starts.start(i), starts.start(i + 1) - starts.start(i)));
  }
  if (key.is_string()) return attribute(target, key.as_string());
  return value::undefined(key.str());
}

value slice(const value& target, const value& start_v, const value& stop_v, const value& step_v) {
  require_defined(target);
  const bool is_string = target.is_string();
  if (!is_string && !target.is_list()) fail("cannot slice '" + std::string(target.type_name()) + "'");
  const std::optional<code_point_index> starts =
      is_string ? std::optional<code_point_index>(std::in_place, target.as_string()) : std::nullopt;
  const std::int64_t size = is_string ? static_cast<std::int64_t>(starts->size()) : static_cast<std::int64_t>(target.as_list().size());
  const std::int64_t step = step_v.is_undefined() || step_v.is_none() ? 1 : step_v.as_int();
  if (step == 0) fail("slice step cannot be zero");
  auto bound = [&](const value& v, std::int64_t fallback) {
    if (v.is_undefined() || v.is_none()) return fallback;
    std::int64_t i = v.as_int();
    if (i < 0) i += size;
    return step > 0 ? std::clamp<std::int64_t>(i, 0, size) : std::clamp<std::int64_t>(i, -1, size - 1);
  };
  const std::int64_t begin = bound(start_v, step > 0 ? 0 : size - 1);
  const std::int64_t end = bound(stop_v, step > 0 ? size : -1);
  if (is_string && step == 1) {  // a substring: one copy, not one per code point
    if (begin >= end) return value(std::string());
    const std::size_t from = starts->start(static_cast<std::size_t>(begin));
    return value(target.as_string().substr(from, starts->start(static_cast<std::size_t>(end)) - from));
  }
  list items;
  std::string text;
  if (!is_string && (step > 0 ? begin < end : begin > end))
    items.reserve(static_cast<std::size_t>((step > 0 ? end - begin + step - 1 : begin - end - step - 1) / (step > 0 ? step : -step)));
  for (std::int64_t i = begin; step > 0 ? i < end : i > end; i += step) {
    const auto u = static_cast<std::size_t>(i);
    if (is_string) text.append(target.as_string(), starts->start(u), starts->start(u + 1) - starts->start(u));
    else items.push_back(target.as_list()[u]);
  }
  return is_string ? value(std::move(text)) : value(std::move(items));
}

list iterate(const value& target) {
  require_defined(target);
  if (target.is_list()) return target.as_list();
  if (target.is_dict()) {
    list keys;
    for (const auto& [key, item] : target.as_dict().items) keys.emplace_back(key);
    return keys;
  }
  if (target.is_string()) {
    list chars;
    const code_point_index starts(target.as_string());
    chars.reserve(starts.size());
    for (std::size_t i = 0; i < starts.size(); ++i)
      chars.emplace_back(target.as_string().substr(starts.start(i), starts.start(i + 1) - starts.start(i)));
    return chars;
  }
  fail("'" + std::string(target.type_name()) + "' object is not iterable");
}

namespace {

/// `a` then `b`, allocated once at their size (operator+ may leave twice the capacity).
std::string joined(const std::string& a, const std::string& b) {
  require_buildable_string(a.size() + b.size());
  std::string out;
  out.reserve(a.size() + b.size());
  out += a;
  out += b;
  return out;
}

}  // namespace

value binary_operation(std::string_view op, const value& a, const value& b) {
  if (op == "~") {
    if (a.is_string() && b.is_string()) return value(joined(a.as_string(), b.as_string()));
    return value(a.str() + b.str());
  }
  if (op == "==") return value(a.equals(b));
  if (op == "!=") return value(!a.equals(b));
  if (op == "in" || op == "not in") {
    require_defined(b);
    bool found = false;
    if (b.is_string()) found = b.as_string().find(require_string(a, "'in <string>'")) != std::string::npos;
    else if (b.is_list()) found = std::any_of(b.as_list().begin(), b.as_list().end(), [&](const value& x) { return x.equals(a); });
    else if (b.is_dict()) found = a.is_string() && b.as_dict().find(a.as_string()) != nullptr;
    else fail("argument of type '" + std::string(b.type_name()) + "' is not iterable");
    return value(op == "in" ? found : !found);
  }
  require_defined(a);
  require_defined(b);
  if (op == "<") return value(compare_values(a, b) < 0);
  if (op == ">") return value(compare_values(a, b) > 0);
  if (op == "<=") return value(compare_values(a, b) <= 0);
  if (op == ">=") return value(compare_values(a, b) >= 0);
  if (op == "+") {
    if (a.is_string() && b.is_string()) return value(joined(a.as_string(), b.as_string()));
    if (a.is_list() && b.is_list()) {
      require_buildable_list(a.as_list().size() + b.as_list().size());
      list joined = a.as_list();
      joined.insert(joined.end(), b.as_list().begin(), b.as_list().end());
      return value(std::move(joined));
    }
  }
  if (op == "*" && a.is_number() && !a.is_float() && (b.is_string() || b.is_list())) return binary_operation(op, b, a);
  if (op == "*" && (a.is_string() || a.is_list()) && b.is_number() && !b.is_float()) {
    if (a.is_string()) {
      const std::size_t bytes = repeated_size(a.as_string().size(), b.as_int());
      require_buildable_string(bytes);
      std::string out;
      out.reserve(bytes);
      for (std::int64_t i = 0; bytes > 0 && i < b.as_int(); ++i) out += a.as_string();
      return value(std::move(out));
    }
    const std::size_t items = repeated_size(a.as_list().size(), b.as_int());
    require_buildable_list(items);
    list out;
    out.reserve(items);
    for (std::int64_t i = 0; items > 0 && i < b.as_int(); ++i) out.insert(out.end(), a.as_list().begin(), a.as_list().end());
    return value(std::move(out));
  }
  if (!a.is_number() || !b.is_number())
    fail("unsupported operand types for " + std::string(op) + ": '" + std::string(a.type_name()) + "' and '" +
         std::string(b.type_name()) + "'");
  const bool integral = !a.is_float() && !b.is_float();
  if (op == "/") {
    if (b.as_double() == 0) fail("division by zero");
    return value(a.as_double() / b.as_double());
  }
  if (integral) {
    const std::int64_t x = a.as_int();
    const std::int64_t y = b.as_int();
    if (op == "+") return value(x + y);
    if (op == "-") return value(x - y);
    if (op == "*") return value(x * y);
    if (op == "//") return value(python_floor_div(x, y));
    if (op == "%") return value(x - python_floor_div(x, y) * y);
  } else {
    const double x = a.as_double();
    const double y = b.as_double();
    if (op == "+") return value(x + y);
    if (op == "-") return value(x - y);
    if (op == "*") return value(x * y);
    if (y == 0 && (op == "//" || op == "%")) fail("float division by zero");
    if (op == "//") return value(std::floor(x / y));
    if (op == "%") return value(x - std::floor(x / y) * y);
  }
  fail("unsupported operator " + std::string(op));
}

bool apply_test(std::string_view name, const value& v, const std::vector<value>& args) {
  auto arg = [&](std::size_t i) -> const value& {
    if (i >= args.size()) fail("test '" + std::string(name) + "' needs an argument");
    return args[i];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "mapping") return v.is_dict() && !v.as_dict().is_namespace;
  if (name == "iterable") return v.is_list() || v.is_string() || (v.is_dict() && !v.as_dict().is_namespace);
  if (name == "sequence") return v.is_list() || v.is_string() || (v.is_dict() && !v.as_dict().is_namespace);
  if (name == "even" || name == "odd") {
    require_defined(v);
    if (!v.is_number()) fail("test '" + std::string(name) + "' expects a number");
    return (v.as_int() % 2 == 0) == (name == "even");
  }
  if (name == "divisibleby") return v.as_int() % arg(0).as_int() == 0;
  if (name == "equalto" || name == "eq" || name == "==") return v.equals(arg(0));
  if (name == "ne" || name == "!=") return !v.equals(arg(0));
  if (name == "in") return binary_operation("in", v, arg(0)).as_bool();
  if (name == "lower") return v.is_string() && v.as_string() == case_map(v.as_string(), false);
  if (name == "upper") return v.is_string() && v.as_string() == case_map(v.as_string(), true);
  fail("unknown test '" + std::string(name) + "'");
}

value apply_filter(std::string_view name, const value& v, const std::vector<value>& args,
                   const keyword_args& keywords) {
  if (name == "default" || name == "d") {
    const value* fallback = argument(args, 0, keywords, "default_value");
    const value* boolean = argument(args, 1, keywords, "boolean");
    const bool use_fallback = v.is_undefined() || (boolean != nullptr && boolean->truthy() && !v.truthy());
    return use_fallback ? (fallback != nullptr ? *fallback : value(std::string())) : v;
  }
  if (name == "safe") return v;
  if (name == "length" || name == "count") return value(length_of(v));
  if (name == "string") return value(v.str());
  if (name == "tojson") {
    const value* indent = argument(args, 0, keywords, "indent");
    return value(to_json_text(v, indent == nullptr || indent->is_none() ? -1 : static_cast<int>(indent->as_int())));
  }
  require_defined(v);
  if (name == "trim") return value(strip_chars(require_string(v, "trim"), argument(args, 0, keywords, "chars"), true, true));
  if (name == "upper") return value(case_map(require_string(v, "upper"), true));
  if (name == "lower") return value(case_map(require_string(v, "lower"), false));
  if (name == "capitalize") return value(capitalize(require_string(v, "capitalize")));
  if (name == "title") return value(title(require_string(v, "title")));
  if (name == "escape" || name == "e") {
    std::string out;
    for (char c : v.str()) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
      }
    }
    return value(std::move(out));
  }
  if (name == "replace") {
    if (args.size() < 2) fail("replace needs (old, new)");
    const value* count = argument(args, 2, keywords, "count");
    return value(replace_all(v.str(), require_string(args[0], "replace"), args[1].str(),
                             count == nullptr || count->is_none() ? -1 : count->as_int()));
  }
  if (name == "join") {
    const value* separator = argument(args, 0, keywords, "d");
    const value* by = argument(args, 1, keywords, "attribute");
    std::string out;
    bool first = true;
    for (const value& item : iterate(v)) {
      if (!first && separator != nullptr) out += separator->str();
      first = false;
      out += (by != nullptr ? attribute(item, by->as_string()) : item).str();
    }
    return value(std::move(out));
  }
  if (name == "first" || name == "last") {
    list items = iterate(v);
    if (items.empty()) return value::undefined(std::string(name));
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.is_string()) return slice(v, value(), value(), value(std::int64_t{-1}));
    list items = iterate(v);
    std::reverse(items.begin(), items.end());
    return value(std::move(items));
  }
  if (name == "list") return value(iterate(v));
  if (name == "items") {
    if (!v.is_dict()) fail("items expects a mapping");
    list pairs;
    for (const auto& [key, item] : v.as_dict().items) pairs.emplace_back(list{value(key), item});
    return value(std::move(pairs));
  }
  if (name == "int") {
    if (v.is_number()) return value(v.is_float() ? static_cast<std::int64_t>(v.as_double()) : v.as_int());
    try {
      return value(static_cast<std::int64_t>(std::stoll(v.str())));
    } catch (const std::exception&) {
      return value(std::int64_t{0});
    }
  }
  if (name == "float") {
    if (v.is_number()) return value(v.as_double());
    try {
      return value(std::stod(v.str()));
    } catch (const std::exception&) {
      return value(0.0);
    }
  }
  if (name == "abs") {
    if (v.is_float()) return value(std::fabs(v.as_double()));
    return value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  if (name == "selectattr" || name == "rejectattr") {
    if (args.empty()) fail(std::string(name) + " needs an attribute name");
    const bool keep_if = name == "selectattr";
    list kept;
    for (const value& item : iterate(v)) {
      const value field = attribute(item, require_string(args[0], std::string(name)));
      const bool pass = args.size() > 1 ? apply_test(require_string(args[1], std::string(name)), field,
                                                     std::vector<value>(args.begin() + 2, args.end()))
                                        : field.truthy();
      if (pass == keep_if) kept.push_back(item);
    }
    return value(std::move(kept));
  }
  if (name == "map") {
    const value* by = keyword(keywords, "attribute");
    list mapped;
    for (const value& item : iterate(v)) {
      if (by != nullptr) mapped.push_back(attribute(item, by->as_string()));
      else if (!args.empty()) mapped.push_back(apply_filter(require_string(args[0], "map"), item, {}, {}));
      else fail("map needs a filter name or attribute=");
    }
    return value(std::move(mapped));
  }
  fail("unknown filter '" + std::string(name) + "'");
}

value call_method(const value& target, std::string_view method, const std::vector<value>& args,
                  const keyword_args& keywords) {
  require_defined(target);
  if (target.is_string()) {
    const std::string& s = target.as_string();
    const value* first = argument(args, 0, keywords, "");
    if (method == "startswith" || method == "endswith") {
      if (first == nullptr) fail(std::string(method) + " needs an argument");
      return value(starts_or_ends(s, *first, method == "startswith"));
    }
    if (method == "strip") return value(strip_chars(s, first, true, true));
    if (method == "lstrip") return value(strip_chars(s, first, true, false));
    if (method == "rstrip") return value(strip_chars(s, first, false, true));
    if (method == "split") {
      const value* max_split = argument(args, 1, keywords, "maxsplit");
      return value(split(s, argument(args, 0, keywords, "sep"), max_split == nullptr ? -1 : max_split->as_int()));
    }
    if (method == "upper" || method == "lower") return value(case_map(s, method == "upper"));
    if (method == "capitalize") return value(capitalize(s));
    if (method == "title") return value(title(s));
    if (method == "replace") {
      if (args.size() < 2) fail("replace needs (old, new)");
      return value(replace_all(s, require_string(args[0], "replace"), require_string(args[1], "replace"),
                               args.size() > 2 ? args[2].as_int() : -1));
    }
    if (method == "join") {
      if (first == nullptr) fail("join needs an argument");
      std::string out;
      bool first_item = true;
      for (const value& item : iterate(*first)) {
        if (!first_item) out += s;
        first_item = false;
        out += require_string(item, "join");
      }
      return value(std::move(out));
    }
  }
  if (target.is_dict() && !target.as_dict().is_namespace) {
    const dict& d = target.as_dict();
    if (method == "items" || method == "keys" || method == "values") {
      list out;
      for (const auto& [key, item] : d.items) {
        if (method == "items") out.emplace_back(list{value(key), item});
        else if (method == "keys") out.emplace_back(key);
        else out.push_back(item);
      }
      return value(std::move(out));
    }
    if (method == "get") {
      if (args.empty()) fail("get needs a key");
      const value* found = d.find(require_string(args[0], "get"));
      return found != nullptr ? *found : args.size() > 1 ? args[1] : value(none_t{});
    }
  }
  fail("'" + std::string(target.type_name()) + "' object has no method '" + std::string(method) + "'");
}

value call_global(std::string_view name, const std::vector<value>& args, const keyword_args& keywords,
                  bool& known) {
  known = true;
  if (name == "namespace" || name == "dict") {
    dict d;
    d.is_namespace = name == "namespace";
    if (!args.empty() && args[0].is_dict())
      for (const auto& [key, item] : args[0].as_dict().items) d.set(key, item);
    for (const auto& [key, item] : keywords) d.set(key, item);
    return value(std::move(d));
  }
  if (name == "raise_exception") fail(args.empty() ? std::string("raise_exception") : args[0].str());
  if (name == "range") {
    std::int64_t start = 0;
    std::int64_t stop = 0;
    std::int64_t step = 1;
    if (args.size() == 1) stop = args[0].as_int();
    else if (args.size() >= 2) {
      start = args[0].as_int();
      stop = args[1].as_int();
      if (args.size() > 2) step = args[2].as_int();
    }
    if (step == 0) fail("range() step must not be zero");
    // In 128 bits: the span of two 64-bit ends does not fit 64.
    if ((static_cast<__int128>(stop) - start) / step > 100000) fail("range() too long");
    list out;
    for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
    return value(std::move(out));
  }
  known = false;
  return value::undefined(std::string(name));
}

}  // namespace kvr::jinja
