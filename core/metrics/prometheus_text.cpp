#include "core/metrics/prometheus_text.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <limits>

namespace kvr {
namespace {

bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':'; }
bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9'); }
bool blank(char c) { return c == ' ' || c == '\t'; }

/// One line, consumed left to right.
class line_reader {
 public:
  explicit line_reader(std::string_view line) : line_(line) {}

  void skip_blanks() {
    while (pos_ < line_.size() && blank(line_[pos_])) ++pos_;
  }
  [[nodiscard]] bool at_end() const { return pos_ == line_.size(); }
  [[nodiscard]] bool next_is(char c) const { return pos_ < line_.size() && line_[pos_] == c; }
  bool take(char c) {
    if (!next_is(c)) return false;
    ++pos_;
    return true;
  }

  /// `[a-zA-Z_:][a-zA-Z0-9_:]*` (label names may not hold ':', checked by the caller).
  std::string_view name() {
    const std::size_t start = pos_;
    if (pos_ < line_.size() && name_start(line_[pos_]))
      while (++pos_ < line_.size() && name_char(line_[pos_])) {
      }
    return line_.substr(start, pos_ - start);
  }

  /// A quoted label value with its escapes undone; false if unterminated or badly escaped.
  bool quoted(std::string& out) {
    if (!take('"')) return false;
    out.clear();
    while (pos_ < line_.size()) {
      const char c = line_[pos_++];
      if (c == '"') return true;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ == line_.size()) return false;
      const char escaped = line_[pos_++];
      if (escaped == 'n') out += '\n';
      else if (escaped == '\\' || escaped == '"') out += escaped;
      else return false;
    }
    return false;
  }

  /// The next blank-delimited token.
  std::string_view token() {
    const std::size_t start = pos_;
    while (pos_ < line_.size() && !blank(line_[pos_])) ++pos_;
    return line_.substr(start, pos_ - start);
  }

 private:
  std::string_view line_;
  std::size_t pos_ = 0;
};

/// Go's ParseFloat spellings Prometheus uses: decimal and exponent forms, NaN, +Inf, -Inf.
bool parse_value(std::string_view text, double& value) {
  if (text == "NaN") return value = std::numeric_limits<double>::quiet_NaN(), true;
  if (text == "+Inf" || text == "Inf") return value = std::numeric_limits<double>::infinity(), true;
  if (text == "-Inf") return value = -std::numeric_limits<double>::infinity(), true;
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc{} && end == text.data() + text.size();
}

bool parse_timestamp(std::string_view text) {
  std::int64_t ms = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
  return !text.empty() && ec == std::errc{} && end == text.data() + text.size();
}

}  // namespace

const std::string* prometheus_sample::label(std::string_view name) const {
  for (const prometheus_label& l : labels)
    if (l.name == name) return &l.value;
  return nullptr;
}

prometheus_parse_result parse_prometheus_text(std::string_view text,
                                              const std::function<void(const prometheus_sample&)>& on_sample) {
  prometheus_parse_result result;
  std::array<prometheus_label, prometheus_max_labels> labels;
  while (!text.empty()) {
    const std::size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);

    line_reader in(line);
    in.skip_blanks();
    if (in.at_end() || in.next_is('#')) continue;  // blank, HELP, TYPE or another comment

    auto malformed = [&result] { ++result.malformed; };
    prometheus_sample sample;
    sample.name = in.name();
    if (sample.name.empty()) {
      malformed();
      continue;
    }
    std::size_t count = 0;
    bool ok = true;
    in.skip_blanks();
    if (in.take('{')) {
      while (true) {
        in.skip_blanks();
        if (in.take('}')) break;
        if (count == labels.size()) {
          ok = false;
          break;
        }
        prometheus_label& label = labels[count];
        label.name = in.name();
        in.skip_blanks();
        if (label.name.empty() || label.name.find(':') != std::string_view::npos || !in.take('=')) {
          ok = false;
          break;
        }
        in.skip_blanks();
        if (!in.quoted(label.value)) {
          ok = false;
          break;
        }
        ++count;
        in.skip_blanks();
        if (in.take(',')) continue;
        if (in.take('}')) break;
        ok = false;
        break;
      }
    }
    if (!ok) {
      malformed();
      continue;
    }
    in.skip_blanks();
    if (!parse_value(in.token(), sample.value)) {
      malformed();
      continue;
    }
    in.skip_blanks();
    if (!in.at_end() && !parse_timestamp(in.token())) {
      malformed();
      continue;
    }
    in.skip_blanks();
    if (!in.at_end()) {
      malformed();
      continue;
    }
    sample.labels = std::span<const prometheus_label>(labels.data(), count);
    ++result.samples;
    on_sample(sample);
  }
  return result;
}

}  // namespace kvr
