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
  const auto& serve = options->serve;
  if (options->command == "explain") {
    if (options->help) {
      std::cout << "Usage: kvrouter explain --config FILE\n\n"
                   "Validates FILE as serving it would (cards, router configs, tokenizers, chat templates) and prints\n"
                   "each worker set's effective router config and what it turns on (prefix overlap, KV events,\n"
                   "multimodal routing), as JSON. Exits 2 if the file would not serve.\n";
      return 0;
    }
    return kvr::cli::run_explain(*options);
  }
  if (options->command == "describe") {
    if (options->help) {
      std::cout << "Usage: kvrouter describe [router options]\n\n"
                   "Prints the effective router config of the router flags given (see kvrouter --help) and what\n"
                   "it turns on, as JSON. For the sets of a config file use kvrouter explain --config FILE.\n";
      return 0;
    }
    if (!serve.config_path.empty() || !serve.etcd_url.empty()) {
      std::cerr << "kvrouter: describe reads router flags only; for a config file use: kvrouter explain --config FILE\n";
      return 2;
    }
    std::cout << describe(options->router).dump(2) << "\n";
    return 0;
  }
  if (options->help) {
    std::cout << kvr::cli::usage();
    return 0;
  }
  const bool has_sets = !serve.workers.empty() || !serve.config_path.empty() || !serve.etcd_url.empty();
  if (options->command.empty() && !has_sets) {
    if (serve.model.empty()) {
      std::cerr << kvr::cli::usage();
    } else {
      std::cerr << "kvrouter: --model " << serve.model
                << " has no worker: give at least one --worker URL (or serve with --config FILE or --etcd URL)\n";
    }
    return 2;
  }
  if (options->command.empty() || options->command == "serve") return kvr::cli::run_serve(*options);
  std::cerr << "kvrouter: unknown command \"" << options->command << "\" (see --help)\n";
  return 2;
}
