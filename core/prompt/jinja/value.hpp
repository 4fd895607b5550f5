#pragma once
/// The values a chat template computes with, behaving as Jinja2 (on Python) does: the engines
/// render templates with Jinja2, so printing, truthiness, equality and `tojson` follow Python's
/// rules (`True`, `None`, `1.0`, `['a', 1]`, insertion-ordered dicts).
///
/// Lists, dicts and namespaces are shared by reference, as Python objects are: that is what
/// lets `{% set ns.found = true %}` inside a loop be seen after it.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kvr::jinja {

class value;
using list = std::vector<value>;

/// The deepest a value may nest when walked (printed, compared, serialized, converted from
/// JSON): past it the walk is a render error, not a stack overflow.
inline constexpr int max_value_depth = 1024;

/// The longest string, and the most list items, one template operation may build (`*`, `+`,
/// `~`, `replace`): a repeat count or a doubling loop driven by the request would otherwise ask
/// for any amount of memory and time. The same bound as the rendered prompt's.
inline constexpr std::size_t max_built_string_bytes = std::size_t{64} << 20;
inline constexpr std::size_t max_built_list_items = std::size_t{1} << 22;

/// A Python dict (insertion-ordered) or a `namespace()` object.
struct dict {
  std::vector<std::pair<std::string, value>> items;
  bool is_namespace = false;

  [[nodiscard]] const value* find(std::string_view key) const;
  void set(std::string key, value v);
};

struct undefined_t {
  std::string name;  ///< what was looked up, for the error message if it is used
  bool operator==(const undefined_t&) const = default;
};
struct none_t {
  bool operator==(const none_t&) const = default;
};

/// Strings longer than this are held once and shared by every copy of their value: a template
/// looks up, assigns and passes a message's content around many times, and a prompt of
/// megabytes was copied whole each time. Shorter ones are held by each copy, as before.
inline constexpr std::size_t shared_string_bytes = 256;

class value {
 public:
  using storage = std::variant<undefined_t, none_t, bool, std::int64_t, double, std::string, std::shared_ptr<list>,
                               std::shared_ptr<dict>, std::shared_ptr<const std::string>>;

  value() = default;
  value(none_t) : v_(none_t{}) {}
  value(bool b) : v_(b) {}
  value(std::int64_t i) : v_(i) {}
  value(int i) : v_(std::int64_t{i}) {}
  value(double d) : v_(d) {}
  value(std::string s) : v_(held_string(std::move(s))) {}
  value(std::string_view s) : value(std::string(s)) {}
  value(const char* s) : value(std::string(s)) {}
  value(list l) : v_(std::make_shared<list>(std::move(l))) {}
  value(dict d) : v_(std::make_shared<dict>(std::move(d))) {}
  static value undefined(std::string name) { return value(storage(undefined_t{std::move(name)})); }

  /// Converts parsed JSON (objects keep their key order).
  static value from_json(const nlohmann::ordered_json& json);

  [[nodiscard]] bool is_undefined() const { return std::holds_alternative<undefined_t>(v_); }
  [[nodiscard]] bool is_none() const { return std::holds_alternative<none_t>(v_); }
  [[nodiscard]] bool is_bool() const { return std::holds_alternative<bool>(v_); }
  [[nodiscard]] bool is_int() const { return std::holds_alternative<std::int64_t>(v_); }
  [[nodiscard]] bool is_float() const { return std::holds_alternative<double>(v_); }
  [[nodiscard]] bool is_number() const { return is_int() || is_float() || is_bool(); }
  [[nodiscard]] bool is_string() const {
    return std::holds_alternative<std::string>(v_) || std::holds_alternative<std::shared_ptr<const std::string>>(v_);
  }
  [[nodiscard]] bool is_list() const { return std::holds_alternative<std::shared_ptr<list>>(v_); }
  [[nodiscard]] bool is_dict() const { return std::holds_alternative<std::shared_ptr<dict>>(v_); }

  [[nodiscard]] bool as_bool() const { return std::get<bool>(v_); }
  [[nodiscard]] std::int64_t as_int() const;  ///< ints and bools
  [[nodiscard]] double as_double() const;     ///< any number
  [[nodiscard]] const std::string& as_string() const {
    if (const auto* held = std::get_if<std::string>(&v_)) return *held;
    return *std::get<std::shared_ptr<const std::string>>(v_);
  }
  [[nodiscard]] list& as_list() const { return *std::get<std::shared_ptr<list>>(v_); }
  [[nodiscard]] dict& as_dict() const { return *std::get<std::shared_ptr<dict>>(v_); }
  [[nodiscard]] const std::string& undefined_name() const { return std::get<undefined_t>(v_).name; }

  /// Python truthiness (undefined is false).
  [[nodiscard]] bool truthy() const;
  /// `{{ v }}`: Python's str() (undefined prints nothing).
  [[nodiscard]] std::string str() const;
  /// Python's repr(), as str() uses it inside lists and dicts.
  [[nodiscard]] std::string repr() const;
  /// Python's ==.
  [[nodiscard]] bool equals(const value& other) const;
  /// The Python type name, for error messages.
  [[nodiscard]] std::string_view type_name() const;

 private:
  explicit value(storage s) : v_(std::move(s)) {}
  static storage held_string(std::string s) {
    if (s.size() > shared_string_bytes) return storage(std::make_shared<const std::string>(std::move(s)));
    return storage(std::move(s));
  }
  static value from_json_at(const nlohmann::ordered_json& json, int level);
  [[nodiscard]] std::string repr_at(int level) const;
  [[nodiscard]] bool equals_at(const value& other, int level) const;
  storage v_;
};

/// Python's float repr: the shortest digits that round-trip, `1.0`, `1e-05`, `1e+16`, `inf`.
[[nodiscard]] std::string python_float_repr(double d);

/// `json.dumps(v, ensure_ascii=False, indent=indent, sort_keys=False)`, which is what
/// HuggingFace installs as the `tojson` filter of chat templates. `indent` < 0 means None.
[[nodiscard]] std::string to_json_text(const value& v, int indent = -1);

}  // namespace kvr::jinja
