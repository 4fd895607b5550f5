#pragma once
/// The one `main` shape of every kvrouter tool (flags are read by app/options.hpp).

#include <exception>
#include <expected>
#include <iostream>
#include <string>

namespace kvr::cli {

/// The shape of each tool's `main`: parsing yields options or an error, an empty error meaning
/// `--help` (print `usage`, exit 0); bad flags exit 2 and failures while running exit 1, each
/// reported with the tool's name.
template <class Options, class Run>
int run_tool(const char* name, const std::string& usage, const std::expected<Options, std::string>& parsed, Run&& run) {
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
