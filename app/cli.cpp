#include "app/cli.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace kvr::cli {
namespace {

std::string flag_for(std::string_view knob_name) {
  std::string flag = "--" + std::string(knob_name);
  std::replace(flag.begin() + 2, flag.end(), '_', '-');
  return flag;
}

/// The knob named by `flag` ("--overlap-score-credit" -> "overlap_score_credit"), if any.
std::string knob_for(std::string_view flag) {
  std::string name(flag.substr(2));
  std::replace(name.begin(), name.end(), '-', '_');
  for (const knob_info& knob : knobs())
    if (knob.name == name) return name;
  return {};
}

}  // namespace

std::expected<options, std::string> parse(const std::vector<std::string>& args) {
  options parsed;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "-h" || arg == "--help") {
      parsed.help = true;
      continue;
    }
    if (!arg.starts_with("--")) {
      if (!parsed.command.empty()) return std::unexpected(fmt::format("unexpected argument \"{}\"", arg));
      parsed.command = std::string(arg);
      continue;
    }
    // Presets and switches first; they are applied in command-line order with the knobs.
    if (arg == "--load-aware") {
      parsed.router = load_aware_preset(parsed.router);
      continue;
    }
    if (arg == "--no-kv-events") {
      parsed.router.use_kv_events = false;
      continue;
    }
    if (arg == "--no-track-active-blocks") {
      parsed.router.track_active_blocks = false;
      continue;
    }
    std::string_view flag = arg;
    std::string value;
    if (auto eq = arg.find('='); eq != std::string_view::npos) {
      flag = arg.substr(0, eq);
      value = std::string(arg.substr(eq + 1));
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return std::unexpected(fmt::format("{} needs a value", flag));
    }
    const std::string knob = knob_for(flag);
    if (knob.empty()) return std::unexpected(fmt::format("unknown option {} (see --help)", flag));
    if (auto set = set_knob(parsed.router, knob, value); !set)
      return std::unexpected(fmt::format("{}: {}", flag, set.error().message));
  }
  if (auto valid = validate(parsed.router); !valid) return std::unexpected(valid.error().message);
  return parsed;
}

std::string usage() {
  std::string text =
      "kvrouter: a KV-cache-aware request router for vLLM / SGLang workers.\n"
      "\n"
      "Usage: kvrouter [describe] [options]\n"
      "\n"
      "Commands:\n"
      "  describe                 print the effective router config and what it turns on, as JSON\n"
      "  kv-dump                  print the KV-event batches an engine publishes, decoded (see kv-dump --help)\n"
      "  kv-index                 subscribe to workers' KV events and print the prefix index built from them\n"
      "\n"
      "Router options (the same names, with '_', are the keys of the config file's \"router\" object):\n";
  for (const knob_info& knob : knobs()) {
    const std::string left = fmt::format("{} {}", flag_for(knob.name), knob.value_hint);
    text += fmt::format("  {:<33} {}\n", left, knob.help);
  }
  text +=
      "  --load-aware                      preset: kv mode, overlap credit 0, no KV events (load balancing only)\n"
      "  --no-kv-events                    same as --use-kv-events false (approximate mode when credit > 0)\n"
      "  --no-track-active-blocks          same as --track-active-blocks false\n"
      "  -h, --help                        this text\n";
  return text;
}

}  // namespace kvr::cli
