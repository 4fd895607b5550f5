/// `kvrouter`: the router binary.

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli.hpp"
#include "app/commands.hpp"

namespace {

/// The effective config and the work it switches on (docs/architecture.md §2, "The gate").
nlohmann::json describe(const kvr::router_config& config) {
  return nlohmann::json{
      {"effective_router_config", kvr::to_json(config)},
      {"uses_prefix_overlap", kvr::uses_prefix_overlap(config)},
      {"kv_events_subscribed", kvr::should_subscribe_to_kv_events(config)},
      {"mm_routing_enabled", kvr::uses_prefix_overlap(config)},
  };
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  // Operator commands with flags of their own.
  if (!args.empty() && args[0] == "kv-dump") return kvr::cli::run_kv_dump({args.begin() + 1, args.end()});
  if (!args.empty() && args[0] == "kv-index") return kvr::cli::run_kv_index({args.begin() + 1, args.end()});
  if (!args.empty() && args[0] == "tokenize") return kvr::cli::run_tokenize({args.begin() + 1, args.end()});
  if (!args.empty() && args[0] == "render-chat") return kvr::cli::run_render_chat({args.begin() + 1, args.end()});

  auto options = kvr::cli::parse(args);
  if (!options) {
    std::cerr << "kvrouter: " << options.error() << "\n";
    return 2;
  }
  if (options->command == "explain") return kvr::cli::run_explain(*options);
  if (options->help || (options->command.empty() && options->serve.workers.empty() && options->serve.config_path.empty() &&
                            options->serve.etcd_url.empty())) {
    std::cout << kvr::cli::usage();
    return 0;
  }
  if (options->command.empty() || options->command == "serve") return kvr::cli::run_serve(*options);
  if (options->command == "describe") {
    std::cout << describe(options->router).dump(2) << "\n";
    return 0;
  }
  std::cerr << "kvrouter: unknown command \"" << options->command << "\" (see --help)\n";
  return 2;
}
