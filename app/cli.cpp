#include "app/cli.hpp"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/options.hpp"

namespace kvr::cli {
namespace {

using row = option<options>;

std::string flag_for(std::string_view knob_name) {
  std::string flag = "--" + std::string(knob_name);
  std::replace(flag.begin() + 2, flag.end(), '_', '-');
  return flag;
}

/// Where the worker sets come from, and what the command-line set needs.
const option_table<options>& source_options() {
  static const option_table<options> table = [] {
    option_table<options> t;
    t.push_back(text<options>("--config", "FILE",
                              "worker sets (model deployment cards) and the global router config, polled for edits "
                              "(docs/configuration.md)",
                              [](auto& o) -> auto& { return o.serve.config_path; }, true));
    t.push_back(text<options>("--etcd", "URL", "etcd v3 (JSON gateway) holding one card per key under --etcd-prefix",
                              [](auto& o) -> auto& { return o.serve.etcd_url; }, true));
    t.push_back(text<options>("--etcd-prefix", "PREFIX", "key prefix of the cards in etcd",
                              [](auto& o) -> auto& { return o.serve.etcd_prefix; }, true));
    t.push_back(text<options>("--model", "NAME", "the model name clients send (serving without --config)",
                              [](auto& o) -> auto& { return o.serve.model; }, true));
    t.push_back(each<options>("--worker", "SPEC",
                              "a worker: URL[,kv_events=ENDPOINT][,replay=ENDPOINT][,dp_size=N][,id=NAME][,topic=T]"
                              "[,role=prefill|decode|both][,bootstrap=PORT]",
                              [](auto& o) -> auto& { return o.serve.workers; }));
    t.push_back(choice<options>("--disaggregation", "PROTOCOL",
                                "the set serves prefill/decode disaggregated: vllm-nixl or sglang (workers' role= form "
                                "the pools; docs/disaggregation.md)",
                                [](auto& o) -> auto& { return o.serve.disaggregation; }, {"none", "vllm-nixl", "sglang"}));
    t.push_back(text<options>("--tokenizer", "PATH",
                              "the set's HuggingFace tokenizer.json: text prompts are tokenized to route on their blocks",
                              [](auto& o) -> auto& { return o.serve.tokenizer_path; }, true));
    t.push_back(text<options>("--tokenizer-config", "PATH",
                              "the set's tokenizer_config.json or .jinja: chats are rendered with its template, then tokenized",
                              [](auto& o) -> auto& { return o.serve.tokenizer_config_path; }, true));
    t.push_back(choice<options>("--chat-template-fallback", "MODE",
                                "concat: a template that fails to load renders chats as 'role: content' lines",
                                [](auto& o) -> auto& { return o.serve.chat_template_fallback; }, {"none", "concat"}));
    t.push_back({"--image-token-id", "N",
                 "the set is multimodal: its template's image placeholder token (images hashed into their blocks)",
                 "0-4294967295",
                 [](options& o, std::string_view v) -> std::expected<void, std::string> {
                   auto n = detail::parse_integer<std::uint32_t>(v, 0, UINT32_MAX);
                   if (!n) return std::unexpected(n.error());
                   o.serve.image_token_id = *n;
                   return {};
                 },
                 {}});
    t.push_back(choice<options>("--image-token-rule", "RULE", "placeholder tokens per image",
                                [](auto& o) -> auto& { return o.serve.image_token_rule; }, {"qwen2-vl", "fixed"}));
    t.push_back(integer<options>("--image-fixed-tokens", "N", "tokens per image for the fixed rule (LLaVA-style)",
                                 [](auto& o) -> auto& { return o.serve.image_fixed_tokens; }, 1, 1000000));
    return t;
  }();
  return table;
}

/// The ingress and the pipelines: the defaults are ingress_settings' and pipeline_settings'.
const option_table<options>& serving_options() {
  static const option_table<options> table = [] {
    option_table<options> t;
    t.push_back(text<options>("--host", "ADDRESS", "listen address", [](auto& o) -> auto& { return o.serve.http.host; }, true));
    t.push_back(integer<options>("--port", "PORT", "listen port; 0 picks a free one (printed at start)",
                                 [](auto& o) -> auto& { return o.serve.http.port; }, 0, 65535));
    t.push_back(integer<options>("--threads", "N", "HTTP I/O threads; 0 = one per core it may run on (CPU affinity)",
                                 [](auto& o) -> auto& { return o.serve.http.threads; }, 0, 256));
    t.push_back(integer<options>("--actor-threads", "N", "CAF scheduler threads (hashing, scoring); 0 = one per core it may run on (CPU affinity)",
                                 [](auto& o) -> auto& { return o.serve.actor_threads; }, 0, 256));
    t.push_back(integer<options>("--hashers", "N",
                                 "hasher actors per worker set (only where prefix overlap is scored); 0 = one per core it may run on (CPU affinity)",
                                 [](auto& o) -> auto& { return o.serve.pipeline.hashers; }, 0, 256));
    t.push_back(integer<options>("--max-body-bytes", "N", "larger request bodies get 413",
                                 [](auto& o) -> auto& { return o.serve.http.max_body_bytes; }, 1, std::uint64_t{1} << 40));
    t.push_back(integer<options>("--max-images-per-request", "N", "requests with more image parts get 400",
                                 [](auto& o) -> auto& { return o.serve.http.max_images_per_request; }, 0, 100000));
    t.push_back(row{"--max-prompt-tokens", "N", "prompts longer than this (tokens, images expanded) get 400", "1-1073741824",
                    [](options& o, std::string_view v) -> std::expected<void, std::string> {
                      auto n = detail::parse_integer<std::uint32_t>(v, 1, 1u << 30);
                      if (!n) return std::unexpected(n.error());
                      o.serve.http.max_prompt_tokens = *n;
                      return {};
                    },
                    [](const options& o) { return std::to_string(o.serve.http.max_prompt_tokens); }});
    t.push_back(integer<options>("--max-retries", "N", "re-routes when a worker fails before answering",
                                 [](auto& o) -> auto& { return o.serve.http.max_retries; }, 0, 16));
    t.push_back(duration<options>("--client-timeout-secs",
                                  "longest a client may take to send a request or to take a chunk of the answer",
                                  [](auto& o) -> auto& { return o.serve.http.client_timeout; }, 1, 86400));
    t.push_back(duration<options>("--upstream-timeout-secs", "longest wait for a worker's next bytes (504 if none came)",
                                  [](auto& o) -> auto& { return o.serve.http.upstream_timeout; }, 1, 86400));
    t.push_back(duration<options>("--pd-timeout-secs",
                                  "longest a disaggregated request's prefill leg may take to answer (504 if it did not)",
                                  [](auto& o) -> auto& { return o.serve.http.pd_timeout; }, 1, 86400));
    t.push_back(text<options>("--session-header", "NAME",
                              "the request header naming a conversation for session affinity (else the body's user)",
                              [](auto& o) -> auto& { return o.serve.http.session_header; }));
    t.push_back(each<options>("--api-key", "KEY",
                              "clients must send Authorization: Bearer KEY (/health, /ready and / stay open)",
                              [](auto& o) -> auto& { return o.serve.http.api_keys; }));
    t.push_back(text<options>("--api-key-file", "PATH", "API keys, one per line ('#' comments), re-read when the file changes",
                              [](auto& o) -> auto& { return o.serve.http.api_key_file; }, true));
    t.push_back(each<options>("--admin-api-key", "KEY",
                              "the keys /metrics and /v1/router/* take instead of the API keys",
                              [](auto& o) -> auto& { return o.serve.http.admin_api_keys; }));
    t.push_back(flag_switch<options>("--forward-authorization",
                                     "send the client's Authorization header on to the worker (by default it stays here)",
                                     [](auto& o) -> auto& { return o.serve.http.forward_authorization; }));
    t.push_back(text<options>("--worker-ca-file", "PATH",
                              "CA certificates (PEM) trusted for https:// workers, besides the system's",
                              [](auto& o) -> auto& { return o.serve.http.worker_ca_file; }, true));
    t.push_back(text<options>("--access-log", "PATH",
                              "one JSON line per routed request (time, request id, model, set, worker, status, prompt "
                              "tokens, overlap, queue wait, TTFT, duration, bytes); - = stdout",
                              [](auto& o) -> auto& { return o.serve.http.access_log; }, true));
    t.push_back(flag_switch<options>("--no-decision-headers",
                                     "answers do not say where they were routed (x-kvrouter-worker, "
                                     "x-kvrouter-overlap-blocks); x-request-id stays",
                                     [](auto& o) -> auto& { return o.serve.http.no_decision_headers; }));
    t.push_back(duration<options>("--drain-delay-secs",
                                  "on SIGTERM, keep accepting connections this long (set it to the load balancer's "
                                  "deregistration delay); /ready answers 503 meanwhile",
                                  [](auto& o) -> auto& { return o.serve.http.drain_delay; }, 0, 3600));
    t.push_back(duration<options>("--shutdown-grace-secs",
                                  "on SIGTERM, longest the requests in flight may take to finish; a second SIGTERM or "
                                  "SIGINT exits at once",
                                  [](auto& o) -> auto& { return o.serve.http.shutdown_grace; }, 0, 3600));
    t.push_back(duration<options>("--unhealthy-backoff-ms", "how long a worker that failed a request is left out",
                                  [](auto& o) -> auto& { return o.serve.pipeline.unhealthy_backoff; }, 0, 3600000));
    t.push_back(duration<options>("--health-interval-ms", "GET /health on every worker this often; 0 = off",
                                  [](auto& o) -> auto& { return o.serve.pipeline.health.interval; }, 0, 3600000));
    t.push_back(duration<options>("--health-timeout-ms", "a probe slower than this fails",
                                  [](auto& o) -> auto& { return o.serve.pipeline.health.timeout; }, 1, 600000));
    t.push_back(integer<options>("--health-failures", "N", "failed probes in a row before a worker is down",
                                 [](auto& o) -> auto& { return o.serve.pipeline.health.failures; }, 1, 1000));
    t.push_back(integer<options>("--health-successes", "N", "good probes in a row before it is up again",
                                 [](auto& o) -> auto& { return o.serve.pipeline.health.successes; }, 1, 1000));
    t.push_back(duration<options>("--engine-metrics-interval-ms",
                                  "GET /metrics on every worker this often (kv mode prices engines' waiting requests, other modes avoid them); 0 = off",
                                  [](auto& o) -> auto& { return o.serve.pipeline.engine_metrics.interval; }, 0, 3600000));
    t.push_back(duration<options>("--engine-metrics-timeout-ms", "a scrape slower than this fails",
                                  [](auto& o) -> auto& { return o.serve.pipeline.engine_metrics.timeout; }, 1, 600000));
    t.push_back(flag_switch<options>("--fault-injection",
                                     "serve POST /v1/router/faults, which kills a pipeline component as a crash would",
                                     [](auto& o) -> auto& { return o.serve.http.fault_injection; }));
    t.push_back(duration<options>("--restart-backoff-ms",
                                  "a pipeline component that died is restarted after this (doubling while it keeps dying)",
                                  [](auto& o) -> auto& { return o.serve.pipeline.restart_backoff; }, 1, 60000));
    t.push_back(duration<options>("--index-grace-secs", "a worker down this long loses its prefix-index entries",
                                  [](auto& o) -> auto& { return o.serve.pipeline.index_grace; }, 0, 86400));
    // Replica sync: each row also records that it was given (the config file's key fills in the rest).
    auto given = [](option<options> row, bool replica_options::*flag) {
      row.set = [set = row.set, flag](options& o, std::string_view v) -> std::expected<void, std::string> {
        o.serve.replicas.*flag = true;
        return set(o, v);
      };
      return row;
    };
    t.push_back(given(text<options>("--nats", "URLS",
                                    "share bookings with the other router replicas over these NATS servers (comma-separated "
                                    "nats://host:port; off when empty; docs/replicas.md)",
                                    [](auto& o) -> auto& { return o.serve.replicas.nats; }, true),
                      &replica_options::nats_given));
    t.push_back(given(text<options>("--replica-id", "NAME", "this replica's name among its peers (default: hostname-pid)",
                                    [](auto& o) -> auto& { return o.serve.replicas.replica_id; }, true),
                      &replica_options::replica_id_given));
    t.push_back(given(text<options>("--nats-subject-prefix", "PREFIX",
                                    "replicas talk on PREFIX.SET.bookings and PREFIX.SET.snapshot",
                                    [](auto& o) -> auto& { return o.serve.replicas.subject_prefix; }, true),
                      &replica_options::subject_prefix_given));
    t.push_back(given(duration<options>("--replica-warmup-ms",
                                        "a new replica's /ready waits at most this long for NATS and one snapshot round of its peers",
                                        [](auto& o) -> auto& { return o.serve.replicas.warmup; }, 0, 600000),
                      &replica_options::warmup_given));
    t.push_back(text<options>("--kv-bind", "ENDPOINT", "bind one KV-event socket that engines connect to (topics tell them apart)",
                              [](auto& o) -> auto& { return o.serve.pipeline.kv_bind; }, true));
    t.push_back(integer<options>("--kv-decoders", "N",
                                 "threads decoding each set's KV events, its publishers shared out between them (one with "
                                 "--kv-bind); 0 = one per 32 publishers, at most a quarter of the cores",
                                 [](auto& o) -> auto& { return o.serve.pipeline.kv_decoders; }, 0, 256));
    t.push_back(flag_switch<options>("--media-allow-private",
                                     "image URLs may resolve to loopback / private addresses (SSRF guard off)",
                                     [](auto& o) -> auto& { return o.serve.pipeline.media.allow_private; }));
    t.push_back(duration<options>("--media-timeout-ms", "longest an image's dimension fetch may take, name resolution and redirects included",
                                  [](auto& o) -> auto& { return o.serve.pipeline.media.timeout; }, 1, 600000));
    t.push_back(integer<options>("--media-cache-entries", "N", "image dimensions cached per set",
                                 [](auto& o) -> auto& { return o.serve.pipeline.media.cache_entries; }, 1, 10000000));
    t.push_back(duration<options>("--media-cache-ttl-secs", "how long they are kept",
                                  [](auto& o) -> auto& { return o.serve.pipeline.media.cache_ttl; }, 1, 86400 * 30));
    t.push_back(integer<options>("--media-max-concurrent", "N", "image fetches at once per set (more wait)",
                                 [](auto& o) -> auto& { return o.serve.pipeline.media.max_concurrent; }, 1, 4096));
    t.push_back(text<options>("--media-ca-file", "PATH", "CA certificates trusted for https image URLs, besides the system's",
                              [](auto& o) -> auto& { return o.serve.pipeline.media.ca_file; }, true));
    return t;
  }();
  return table;
}

/// The router knobs (core/config's table) and the presets; applied in command-line order.
const option_table<options>& router_options() {
  static const option_table<options> table = [] {
    option_table<options> t;
    for (const knob_info& knob : knobs()) {
      const std::string name(knob.name);
      t.push_back({flag_for(knob.name), knob.value_hint, std::string(knob.help), std::string(knob.range),
                   [name](options& o, std::string_view v) -> std::expected<void, std::string> {
                     if (auto set = set_knob(o.router, name, v); !set) return std::unexpected(set.error().message);
                     o.router_flags_given = true;
                     return {};
                   },
                   [name](const options& o) {
                     const nlohmann::json value = to_json(o.router)[name];
                     return value.is_string() ? value.get<std::string>() : value.dump();
                   }});
    }
    auto preset = [](std::string_view flag, std::string help, void (*apply)(router_config&)) {
      return row{std::string(flag), {}, std::move(help), {},
                 [apply](options& o, std::string_view) -> std::expected<void, std::string> {
                   apply(o.router);
                   o.router_flags_given = true;
                   return {};
                 },
                 {}};
    };
    t.push_back(preset("--load-aware", "preset: kv mode, overlap credit 0, no KV events (load balancing only)",
                       [](router_config& c) { c = load_aware_preset(c); }));
    t.push_back(preset("--no-kv-events", "same as --use-kv-events false (approximate mode when credit > 0)",
                       [](router_config& c) { c.use_kv_events = false; }));
    t.push_back(preset("--no-track-active-blocks", "same as --track-active-blocks false",
                       [](router_config& c) { c.track_active_blocks = false; }));
    return t;
  }();
  return table;
}

}  // namespace

std::expected<options, std::string> parse(const std::vector<std::string>& args) {
  option_table<options> all = source_options();
  all.insert(all.end(), serving_options().begin(), serving_options().end());
  all.insert(all.end(), router_options().begin(), router_options().end());
  options parsed;
  auto ok = parse_options<options>(all, args, parsed, [](options& o, std::string_view arg) -> std::expected<void, std::string> {
    if (!o.command.empty()) return std::unexpected(fmt::format("unexpected argument \"{}\"", arg));
    o.command = std::string(arg);
    return {};
  });
  if (!ok && ok.error().empty()) parsed.help = true;
  else if (!ok) return std::unexpected(ok.error());
  if (auto valid = validate(parsed.router); !valid) return std::unexpected(valid.error().message);
  return parsed;
}

std::expected<worker_spec, config_error> parse_worker_flag(std::string_view text, std::string_view program) {
  std::vector<deprecated_key> deprecated;
  auto spec = parse_worker_spec(text, &deprecated);
  for (const deprecated_key& key : deprecated)
    fmt::print(stderr, "{}: warning: --worker {}: \"{}=\" is the old spelling of \"{}=\" (the config file's key); "
               "it is still read, but will go\n", program, text, key.old_key, key.new_key);
  return spec;
}

std::string usage() {
  return "kvrouter: a KV-cache-aware request router for vLLM / SGLang workers.\n"
         "\n"
         "Usage: kvrouter --model NAME --worker URL[,kv_events=tcp://HOST:PORT][,replay=tcp://HOST:PORT][,dp_size=N][,id=NAME] ...\n"
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
         "Worker sets:\n" +
         options_help<options>(source_options()) +
         "\n"
         "Serving options:\n" +
         options_help<options>(serving_options()) +
         "\n"
         "Router options (the same names, with '_', are the keys of the config file's \"router\" object):\n" +
         options_help<options>(router_options()) + "  -h, --help                        this text\n";
}

}  // namespace kvr::cli
