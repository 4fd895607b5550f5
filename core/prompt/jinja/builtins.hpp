#pragma once
/// The filters, tests, methods and global functions chat templates call, with Jinja2's (and
/// Python's) behaviour. Internal to the template engine.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/prompt/jinja/value.hpp"

namespace kvr::jinja {

using keyword_args = std::vector<std::pair<std::string, value>>;

[[nodiscard]] bool is_known_filter(std::string_view name);
[[nodiscard]] bool is_known_test(std::string_view name);

value apply_filter(std::string_view name, const value& target, const std::vector<value>& args,
                   const keyword_args& keywords);
bool apply_test(std::string_view name, const value& target, const std::vector<value>& args);
/// `target.method(args)`: string, dict and loop methods.
value call_method(const value& target, std::string_view method, const std::vector<value>& args,
                  const keyword_args& keywords);
/// `name(args)`: `namespace`, `raise_exception`, `range`, `dict`. Returns undefined for others.
value call_global(std::string_view name, const std::vector<value>& args, const keyword_args& keywords,
                  bool& known);

/// Python's `a op b` for arithmetic, comparison, `in` and `~`.
value binary_operation(std::string_view op, const value& left, const value& right);
/// Python's `x[key]` (negative list indices count from the end; missing: undefined).
value subscript(const value& target, const value& key);
/// Python's `x[start:stop:step]` on lists and strings (by code point).
value slice(const value& target, const value& start, const value& stop, const value& step);
/// Jinja's `x.name`: a dict key (or undefined named after it).
value attribute(const value& target, std::string_view name);
/// What a `for` loop iterates: list items, dict keys, string characters.
list iterate(const value& target);
/// Throws render_error if `v` is undefined (using it is an error in Jinja).
void require_defined(const value& v);
/// Throws render_error, before it is built, for a string of `bytes` past `max_built_string_bytes`.
void require_buildable_string(std::size_t bytes);

}  // namespace kvr::jinja
