#pragma once
/// The command-line options of every kvrouter binary as one table per tool: each row names the
/// flag, its value, its range, its help and the field it sets. Parsing, `--help` and the
/// defaults it prints all come from the table, and the defaults themselves only from the
/// initializers of the fields the rows set (so a default is written once). One flag loop
/// (`parse_options`) serves every binary: `--flag value` and `--flag=value`, switches, `-h`,
/// unknown flags and missing or out-of-range values named in the error.

#include <charconv>
#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

namespace kvr::cli {

template <class Options>
struct option {
  std::string flag;       ///< "--max-retries"
  std::string_view hint;  ///< the value's placeholder ("N", "PATH"); empty for a switch
  std::string help;       ///< what it does (one sentence, no default: that is printed from `show`)
  std::string range;      ///< what values it takes, for help and docs ("0-16"); empty = any
  /// Sets the option from its value (a switch gets ""); the error says what was wrong.
  std::function<std::expected<void, std::string>(Options&, std::string_view)> set;
  /// The option's value as text (its default, when shown for a default-constructed Options);
  /// empty function or text = no default to show.
  std::function<std::string(const Options&)> show;
};

template <class Options>
using option_table = std::vector<option<Options>>;

/// Where a row's value lives, e.g. `[](serve_options& o) -> auto& { return o.http.max_retries; }`.
template <class F, class Options>
using field_type = std::remove_reference_t<std::invoke_result_t<F, Options&>>;

namespace detail {

template <class T>
std::expected<T, std::string> parse_integer(std::string_view text, T min, T max) {
  T n{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc{} || end != text.data() + text.size() || n < min || n > max)
    return std::unexpected(fmt::format("expects an integer from {} to {}, got \"{}\"", min, max, text));
  return n;
}

inline std::expected<double, std::string> parse_real(std::string_view text, double min, double max) {
  double n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc{} || end != text.data() + text.size() || !(n >= min && n <= max))
    return std::unexpected(fmt::format("expects a number from {} to {}, got \"{}\"", min, max, text));
  return n;
}

/// `text` broken at spaces into lines of at most `width` columns, the first starting at column
/// `indent` and the rest indented to it; ends with a newline.
inline std::string wrap(std::string_view text, std::size_t indent, std::size_t width) {
  std::string out;
  std::size_t column = indent;
  while (!text.empty()) {
    const std::size_t space = text.find(' ');
    const std::string_view word = text.substr(0, space);
    if (column > indent && column + 1 + word.size() > width) {
      out += '\n';
      out.append(indent, ' ');
      column = indent;
    } else if (column > indent) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    text = space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
  }
  return out + "\n";
}

}  // namespace detail

/// An integer field (any integral type), within [min, max].
template <class Options, class F>
option<Options> integer(std::string flag, std::string_view hint, std::string help, F field,
                        std::uint64_t min, std::uint64_t max) {
  using T = field_type<F, Options>;
  return {std::move(flag), hint, std::move(help), fmt::format("{}-{}", min, max),
          [field, min, max](Options& o, std::string_view v) -> std::expected<void, std::string> {
            auto n = detail::parse_integer<std::uint64_t>(v, min, max);
            if (!n) return std::unexpected(n.error());
            field(o) = static_cast<T>(*n);
            return {};
          },
          [field](const Options& o) { return fmt::format("{}", field(o)); }};
}

/// A real-number field within [min, max].
template <class Options, class F>
option<Options> real(std::string flag, std::string_view hint, std::string help, F field, double min, double max) {
  return {std::move(flag), hint, std::move(help), fmt::format("{}-{}", min, max),
          [field, min, max](Options& o, std::string_view v) -> std::expected<void, std::string> {
            auto n = detail::parse_real(v, min, max);
            if (!n) return std::unexpected(n.error());
            field(o) = *n;
            return {};
          },
          [field](const Options& o) { return fmt::format("{}", field(o)); }};
}

/// A std::chrono::duration field, given as a count of its own unit, within [min, max].
template <class Options, class F>
option<Options> duration(std::string flag, std::string help, F field, std::uint64_t min, std::uint64_t max) {
  using D = field_type<F, Options>;
  return {std::move(flag), "N", std::move(help), fmt::format("{}-{}", min, max),
          [field, min, max](Options& o, std::string_view v) -> std::expected<void, std::string> {
            auto n = detail::parse_integer<std::uint64_t>(v, min, max);
            if (!n) return std::unexpected(n.error());
            field(o) = D(static_cast<typename D::rep>(*n));
            return {};
          },
          [field](const Options& o) { return fmt::format("{}", field(o).count()); }};
}

/// A text field (a path, an address, a name); `nonempty` refuses "".
template <class Options, class F>
option<Options> text(std::string flag, std::string_view hint, std::string help, F field, bool nonempty = false) {
  return {std::move(flag), hint, std::move(help), {},
          [field, nonempty](Options& o, std::string_view v) -> std::expected<void, std::string> {
            if (nonempty && v.empty()) return std::unexpected("must not be empty");
            field(o) = std::string(v);
            return {};
          },
          [field](const Options& o) { return std::string(field(o)); }};
}

/// A repeatable flag: each use appends its value.
template <class Options, class F>
option<Options> each(std::string flag, std::string_view hint, std::string help, F field) {
  return {std::move(flag), hint, std::move(help), "repeatable",
          [field](Options& o, std::string_view v) -> std::expected<void, std::string> {
            field(o).emplace_back(v);
            return {};
          },
          {}};
}

/// A switch: present = `value`.
template <class Options, class F>
option<Options> flag_switch(std::string flag, std::string help, F field, bool value = true) {
  return {std::move(flag), {}, std::move(help), {},
          [field, value](Options& o, std::string_view) -> std::expected<void, std::string> {
            field(o) = value;
            return {};
          },
          {}};
}

/// One of `choices`.
template <class Options, class F>
option<Options> choice(std::string flag, std::string_view hint, std::string help, F field,
                       std::vector<std::string> choices) {
  std::string range;
  for (const auto& c : choices) range = range.empty() ? c : fmt::format("{}|{}", range, c);
  return {std::move(flag), hint, std::move(help), range,
          [field, choices, range](Options& o, std::string_view v) -> std::expected<void, std::string> {
            for (const auto& c : choices)
              if (c == v) {
                field(o) = std::string(v);
                return {};
              }
            return std::unexpected(fmt::format("takes {} (got \"{}\")", range, v));
          },
          [field](const Options& o) { return std::string(field(o)); }};
}

/// The row without a default in `--help` (its initial value means "not given").
template <class Options>
option<Options> without_default(option<Options> row) {
  row.show = {};
  return row;
}

/// Reads `args` into `out` by `table`. Arguments that are not flags go to `positional` (an
/// error if it is empty or refuses them). An empty error means `-h` / `--help` was asked for.
template <class Options>
std::expected<void, std::string> parse_options(
    std::span<const option<Options>> table, std::span<const std::string> args, Options& out,
    const std::function<std::expected<void, std::string>(Options&, std::string_view)>& positional = {}) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "-h" || arg == "--help") return std::unexpected("");
    if (!arg.starts_with("--")) {
      if (!positional) return std::unexpected(fmt::format("unexpected argument \"{}\" (see --help)", arg));
      if (auto ok = positional(out, arg); !ok) return ok;
      continue;
    }
    const auto eq = arg.find('=');
    const std::string_view name = arg.substr(0, eq);
    const option<Options>* row = nullptr;
    for (const auto& o : table)
      if (o.flag == name) row = &o;
    if (row == nullptr) return std::unexpected(fmt::format("unknown option {} (see --help)", name));
    std::string_view value;
    if (row->hint.empty()) {
      if (eq != std::string_view::npos) return std::unexpected(fmt::format("{} takes no value", name));
    } else if (eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return std::unexpected(fmt::format("{} needs a value ({})", name, row->hint));
    }
    if (auto ok = row->set(out, value); !ok) return std::unexpected(fmt::format("{}: {}", name, ok.error()));
  }
  return {};
}

/// The table as `--help` lines: flag and value, help, then the default and range.
template <class Options>
std::string options_help(std::span<const option<Options>> table, const Options& defaults = {}) {
  std::string out;
  for (const auto& o : table) {
    const std::string left = o.hint.empty() ? std::string(o.flag) : fmt::format("{} {}", o.flag, o.hint);
    std::string notes;
    const std::string shown = o.show ? o.show(defaults) : std::string();
    if (!shown.empty()) notes = fmt::format("default {}", shown);
    if (!o.range.empty()) notes = notes.empty() ? o.range : fmt::format("{}; {}", notes, o.range);
    const std::string line = o.help + (notes.empty() ? "" : fmt::format(" ({})", notes));
    out += fmt::format("  {:<33} {}", left, detail::wrap(line, 36, 104));
  }
  return out;
}

}  // namespace kvr::cli
