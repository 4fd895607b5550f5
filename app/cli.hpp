#pragma once
/// Command-line parsing for `kvrouter`: the router-config flags are generated from the knob
/// table in core/router_config, so flags and config-file keys cannot drift apart.

#include <expected>
#include <string>
#include <vector>

#include "core/router_config.hpp"

namespace kvr::cli {

struct options {
  std::string command;            ///< first positional argument ("" = none)
  router_config router;           ///< global router config from flags over defaults
  bool help = false;
};

/// Parses `args` (without the program name). Errors name the offending flag.
[[nodiscard]] std::expected<options, std::string> parse(const std::vector<std::string>& args);

/// The `--help` text.
[[nodiscard]] std::string usage();

}  // namespace kvr::cli
