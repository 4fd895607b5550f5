#include "app/cli.hpp"

#include <algorithm>
#include <charconv>
#include <optional>

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

template <class T>
std::expected<void, std::string> parse_count(std::string_view flag, const std::string& value, T& out, std::uint64_t max) {
  std::uint64_t n = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc{} || end != value.data() + value.size() || n > max)
    return std::unexpected(fmt::format("{} expects an integer from 0 to {}, got \"{}\"", flag, max, value));
  out = static_cast<T>(n);
  return {};
}

/// The serving flags; nullopt if `flag` is not one of them.
std::optional<std::expected<void, std::string>> parse_serve_flag(serve_options& serve, std::string_view flag,
                                                                 const std::string& value) {
  if (flag == "--model") {
    serve.model = value;
    return std::expected<void, std::string>{};
  }
  if (flag == "--worker") {
    serve.workers.push_back(value);
    return std::expected<void, std::string>{};
  }
  if (flag == "--host") {
    serve.host = value;
    return std::expected<void, std::string>{};
  }
  if (flag == "--tokenizer") {
    serve.tokenizer_path = value;
    return std::expected<void, std::string>{};
  }
  if (flag == "--tokenizer-config") {
    serve.tokenizer_config_path = value;
    return std::expected<void, std::string>{};
  }
  if (flag == "--image-token-id") {
    std::uint32_t id = 0;
    if (auto parsed = parse_count(flag, value, id, UINT32_MAX); !parsed) return parsed;
    serve.image_token_id = id;
    return std::expected<void, std::string>{};
  }
  if (flag == "--image-token-rule") {
    if (value != "qwen2-vl" && value != "fixed") return std::unexpected("--image-token-rule takes qwen2-vl or fixed (got " + value + ")");
    serve.image_token_rule = value;
    return std::expected<void, std::string>{};
  }
  if (flag == "--image-fixed-tokens") return parse_count(flag, value, serve.image_fixed_tokens, 1000000);
  if (flag == "--chat-template-fallback") {
    if (value != "none" && value != "concat")
      return std::unexpected("--chat-template-fallback takes none or concat (got " + value + ")");
    serve.chat_template_fallback_concat = value == "concat";
    return std::expected<void, std::string>{};
  }
  if (flag == "--etcd") {
    serve.etcd_url = value;
    return std::expected<void, std::string>{};
  }
  if (flag == "--etcd-prefix") {
    serve.etcd_prefix = value;
    return std::expected<void, std::string>{};
  }
  if (flag == "--config") {
    serve.config_path = value;
    return std::expected<void, std::string>{};
  }
  if (flag == "--kv-bind") {
    serve.kv_bind = value;
    return std::expected<void, std::string>{};
  }
  if (flag == "--port") return parse_count(flag, value, serve.port, 65535);
  if (flag == "--threads") return parse_count(flag, value, serve.io_threads, 256);
  if (flag == "--actor-threads") return parse_count(flag, value, serve.actor_threads, 256);
  if (flag == "--hashers") return parse_count(flag, value, serve.hashers, 256);
  if (flag == "--max-body-bytes") return parse_count(flag, value, serve.max_body_bytes, std::uint64_t{1} << 40);
  if (flag == "--max-retries") return parse_count(flag, value, serve.max_retries, 16);
  if (flag == "--client-timeout-secs") return parse_count(flag, value, serve.client_timeout_secs, 86400);
  if (flag == "--upstream-timeout-secs") return parse_count(flag, value, serve.upstream_timeout_secs, 86400);
  if (flag == "--unhealthy-backoff-ms") return parse_count(flag, value, serve.unhealthy_backoff_ms, 3600000);
  if (flag == "--health-interval-ms") return parse_count(flag, value, serve.health_interval_ms, 3600000);
  if (flag == "--health-timeout-ms") return parse_count(flag, value, serve.health_timeout_ms, 600000);
  if (flag == "--health-failures") return parse_count(flag, value, serve.health_failures, 1000);
  if (flag == "--health-successes") return parse_count(flag, value, serve.health_successes, 1000);
  if (flag == "--index-grace-secs") return parse_count(flag, value, serve.index_grace_secs, 86400);
  if (flag == "--media-ca-file") {
    serve.media_ca_file = value;
    return std::expected<void, std::string>{};
  }
  if (flag == "--media-timeout-ms") return parse_count(flag, value, serve.media_timeout_ms, 600000);
  if (flag == "--media-cache-entries") return parse_count(flag, value, serve.media_cache_entries, 10000000);
  if (flag == "--media-cache-ttl-secs") return parse_count(flag, value, serve.media_cache_ttl_secs, 86400 * 30);
  if (flag == "--media-max-concurrent") return parse_count(flag, value, serve.media_max_concurrent, 4096);
  return std::nullopt;
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
    if (arg == "--media-allow-private") {
      parsed.serve.media_allow_private = true;
      continue;
    }
    if (arg == "--load-aware" || arg == "--no-kv-events" || arg == "--no-track-active-blocks") {
      if (arg == "--load-aware") parsed.router = load_aware_preset(parsed.router);
      else if (arg == "--no-kv-events") parsed.router.use_kv_events = false;
      else parsed.router.track_active_blocks = false;
      parsed.router_flags_given = true;
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
    if (auto handled = parse_serve_flag(parsed.serve, flag, value)) {
      if (!*handled) return std::unexpected(handled->error());
      continue;
    }
    const std::string knob = knob_for(flag);
    if (knob.empty()) return std::unexpected(fmt::format("unknown option {} (see --help)", flag));
    if (auto set = set_knob(parsed.router, knob, value); !set)
      return std::unexpected(fmt::format("{}: {}", flag, set.error().message));
    parsed.router_flags_given = true;
  }
  if (auto valid = validate(parsed.router); !valid) return std::unexpected(valid.error().message);
  return parsed;
}

std::string usage() {
  std::string text =
      "kvrouter: a KV-cache-aware request router for vLLM / SGLang workers.\n"
      "\n"
      "Usage: kvrouter --model NAME --worker URL[,kv=tcp://HOST:PORT][,replay=tcp://HOST:PORT][,dp=N][,id=NAME] ...\n"
      "                [--port 8080] [router options]      serve one worker set (OpenAI API on --port)\n"
      "       kvrouter --config FILE [options]            serve the worker sets of a config file\n"
      "       kvrouter --etcd http://HOST:2379 [--etcd-prefix /kvrouter/] [options]\n"
      "                                                   serve the worker sets whose cards are in etcd\n"
      "       kvrouter explain --config FILE              print each set's effective config and what it turns on\n"
      "       kvrouter describe [router options]          print the effective config and what it turns on\n"
      "       kvrouter kv-dump | kv-index ...             KV-event tools (see their --help)\n"
      "       kvrouter tokenize --tokenizer PATH          UTF-8 text on stdin -> token ids as one JSON array\n"
      "       kvrouter render-chat --tokenizer-config PATH [--tokenize --tokenizer PATH]\n"
      "                                                   OpenAI messages on stdin -> the prompt the chat template renders\n"
      "\n"
      "Router options (the same names, with '_', are the keys of the config file's \"router\" object):\n";
  for (const knob_info& knob : knobs()) {
    const std::string left = fmt::format("{} {}", flag_for(knob.name), knob.value_hint);
    text += fmt::format("  {:<33} {}\n", left, knob.help);
  }
  text +=
      "\n"
      "Serving options:\n"
      "  --config FILE                     worker sets (model deployment cards) and the global router config;\n"
      "                                    see docs/configuration.md (router options then go in its \"router\" object)\n"
      "  --etcd URL                        etcd v3 (JSON gateway) holding one card per key under --etcd-prefix;\n"
      "                                    router options on the command line are the global config\n"
      "  --etcd-prefix PREFIX              key prefix of the cards (default /kvrouter/)\n"
      "  --model NAME                      the model name clients send (serving without --config)\n"
      "  --worker SPEC                     a worker: URL[,kv=ENDPOINT][,replay=ENDPOINT][,dp=N][,id=NAME][,topic=T];\n"
      "                                    repeat for each worker (kv= is the engine's KV-event publisher)\n"
      "  --tokenizer PATH                  the set's HuggingFace tokenizer.json: text prompts are tokenized to\n"
      "                                    route on the blocks the engines cache (kv mode)\n"
      "  --tokenizer-config PATH           the set's tokenizer_config.json (or a .jinja file): chat requests are\n"
      "                                    rendered with its chat template, as the engines do, then tokenized\n"
      "  --chat-template-fallback MODE     none (default: a template that fails to load refuses the set) or\n"
      "                                    concat (render chats as plain 'role: content' lines instead)\n"
      "  --image-token-id N                the set is multimodal: its template's image placeholder token; each image\n"
      "                                    becomes its token count and its hash is mixed into its blocks (kv mode)\n"
      "  --image-token-rule RULE           qwen2-vl (default: 28-pixel tiles within min/max pixels) or fixed\n"
      "  --image-fixed-tokens N            tokens per image for the fixed rule (default 576, LLaVA-style)\n"
      "  --host ADDRESS                    listen address (default 0.0.0.0)\n"
      "  --port PORT                       listen port (default 8080; 0 = any free port, printed at start)\n"
      "  --threads N                       HTTP I/O threads (default: one per core)\n"
      "  --actor-threads N                 CAF scheduler threads (default 2)\n"
      "  --hashers N                       hasher actors per worker set (default 2)\n"
      "  --max-body-bytes N                larger requests get 413 (default 33554432)\n"
      "  --max-retries N                   re-routes when a worker fails before answering (default 2)\n"
      "  --client-timeout-secs N           longest a client may take to send a request or take a chunk (default 60)\n"
      "  --upstream-timeout-secs N         longest wait for a worker's next bytes (default 600)\n"
      "  --unhealthy-backoff-ms N          how long a worker that failed a request is left out (default 5000)\n"
      "  --health-interval-ms N            GET /health on every worker this often (default 2000; 0 = off)\n"
      "  --health-timeout-ms N             a probe slower than this fails (default 1000)\n"
      "  --health-failures N               failed probes in a row before a worker is down (default 2)\n"
      "  --health-successes N              good probes in a row before it is up again (default 1)\n"
      "  --index-grace-secs N              a down worker's index entries are kept this long (default 60)\n"
      "  --kv-bind ENDPOINT                bind one KV-event socket engines connect to (topics tell them apart)\n"
      "  --media-allow-private             image URLs may resolve to loopback / private addresses (tests, closed\n"
      "                                    networks; refused by default: SSRF)\n"
      "  --media-timeout-ms N              longest an image's dimension fetch may take (default 10000)\n"
      "  --media-cache-entries N           image dimensions cached per set (default 4096)\n"
      "  --media-cache-ttl-secs N          how long they are kept (default 600)\n"
      "  --media-max-concurrent N          image fetches at once per set (default 32; more wait)\n"
      "  --media-ca-file PATH              trust these CA certificates for https image URLs, besides the system's\n"
      "\n"
      "Router switches:\n"
      "  --load-aware                      preset: kv mode, overlap credit 0, no KV events (load balancing only)\n"
      "  --no-kv-events                    same as --use-kv-events false (approximate mode when credit > 0)\n"
      "  --no-track-active-blocks          same as --track-active-blocks false\n"
      "  -h, --help                        this text\n";
  return text;
}

}  // namespace kvr::cli
