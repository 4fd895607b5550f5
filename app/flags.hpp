#pragma once
/// A minimal `--name value` / `--name=value` reader for the operator commands.

#include <exception>
#include <expected>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvr::cli {

class flag_reader {
 public:
  explicit flag_reader(std::vector<std::string> args) : args_(std::move(args)) {}

  /// Advances to the next argument; false at the end.
  bool next() {
    if (++index_ >= args_.size()) return false;
    const std::string& arg = args_[index_];
    const auto eq = arg.find('=');
    name_ = arg.starts_with("--") && eq != std::string::npos ? arg.substr(0, eq) : arg;
    inline_value_ = arg.starts_with("--") && eq != std::string::npos ? std::optional(arg.substr(eq + 1)) : std::nullopt;
    return true;
  }
  [[nodiscard]] const std::string& name() const { return name_; }
  /// The flag's value (inline after `=` or the next argument); nullopt if missing.
  std::optional<std::string> value() {
    if (inline_value_) return inline_value_;
    if (index_ + 1 >= args_.size()) return std::nullopt;
    return args_[++index_];
  }

 private:
  std::vector<std::string> args_;
  std::size_t index_ = static_cast<std::size_t>(-1);
  std::string name_;
  std::optional<std::string> inline_value_;
};

/// The shape of each tool's `main`: parsing yields options or an error, an empty error meaning
/// `--help` (print `usage`, exit 0); bad flags exit 2 and failures while running exit 1, each
/// reported with the tool's name.
template <class Options, class Run>
int run_tool(const char* name, const char* usage, const std::expected<Options, std::string>& parsed, Run&& run) {
  if (!parsed) {
    if (parsed.error().empty()) {
      std::cout << usage;
      return 0;
    }
    std::cerr << name << ": " << parsed.error() << "\n";
    return 2;
  }
  try {
    return run(*parsed);
  } catch (const std::exception& e) {
    std::cerr << name << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace kvr::cli
