/// `kvrouter-mocker`: a simulated vLLM / SGLang worker for trying and benchmarking kvrouter
/// without GPUs. See docs/mocker.md.

#include <csignal>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "app/flags.hpp"
#include "app/options.hpp"
#include "app/mocker/engine_loop.hpp"
#include "app/mocker/event_publisher.hpp"
#include "app/mocker/http_server.hpp"
#include "app/mocker/openai_mock.hpp"
#include "core/config/worker_spec.hpp"

namespace kvr::mocker {
namespace {

struct options {
  server_settings server;
  std::string port_file;
  std::string tokenizer_path;
  std::string tokenizer_config_path;
  std::optional<std::uint32_t> image_token_id;  ///< set: a multimodal model
  multimodal_card image_rules;                   ///< its token-count rule (used with image_token_id)
  std::optional<multimodal_card> multimodal;     ///< built from the two above after parsing
  engine_settings engine;
  std::uint32_t dp_size = 1;
  publisher_settings events;
  std::string replay_endpoint;
  std::string event_format = "vllm-array";
  bool no_token_ids = false;
  std::uint32_t kv_lease_secs = 30;
};

using row = cli::option<options>;

const cli::option_table<options>& http_options() {
  static const cli::option_table<options> t = {
      cli::text<options>("--host", "ADDRESS", "listen address", [](auto& o) -> auto& { return o.server.host; }, true),
      cli::integer<options>("--port", "PORT", "listen port; 0 = any free port", [](auto& o) -> auto& { return o.server.port; }, 0, 65535),
      cli::text<options>("--port-file", "PATH", "write the port there once listening (for scripts using --port 0)",
                         [](auto& o) -> auto& { return o.port_file; }, true),
      cli::text<options>("--model", "NAME", "the model name in answers and /v1/models", [](auto& o) -> auto& { return o.server.model; }, true),
      cli::integer<options>("--threads", "N", "HTTP threads", [](auto& o) -> auto& { return o.server.threads; }, 1, 64),
      cli::choice<options>("--role", "ROLE",
                           "disaggregated serving: prefill (computes the prompt and hands its blocks over), decode "
                           "(takes the prefill worker's blocks, checks their hashes, then decodes) or both",
                           [](auto& o) -> auto& { return o.server.role; }, {"both", "prefill", "decode"}),
      cli::choice<options>("--pd", "PROTOCOL",
                           "the disaggregation protocol spoken: vllm-nixl (the decode worker pulls the blocks named by "
                           "the prefill's kv_transfer_params) or sglang (both legs meet in the body's bootstrap_room)",
                           [](auto& o) -> auto& { return o.server.pd; }, {"vllm-nixl", "sglang"}),
      cli::integer<options>("--bootstrap-port", "PORT",
                            "--pd sglang --role prefill: the bootstrap server's port (the router's bootstrap=); 0 = any",
                            [](auto& o) -> auto& { return o.server.bootstrap_port; }, 0, 65535),
      cli::integer<options>("--kv-lease-secs", "N", "how long a prefill worker holds a prompt's blocks for its decode worker",
                            [](auto& o) -> auto& { return o.kv_lease_secs; }, 1, 3600),
  };
  return t;
}

const cli::option_table<options>& prompt_options() {
  static const cli::option_table<options> t = {
      cli::text<options>("--tokenizer", "PATH",
                         "HuggingFace tokenizer.json (without it, text is split on spaces and hashed, which no router "
                         "can match: send token-id prompts instead)",
                         [](auto& o) -> auto& { return o.tokenizer_path; }, true),
      cli::text<options>("--tokenizer-config", "PATH",
                         "tokenizer_config.json or .jinja: chats are rendered with its template (without it, as plain "
                         "'role: content' lines)",
                         [](auto& o) -> auto& { return o.tokenizer_config_path; }, true),
      row{"--image-token-id", "N",
          "a multimodal model: data-URI images of chats become their placeholder tokens, hashed into their blocks and "
          "named in extra_keys, as kvrouter computes them (URL images stay one token: the mocker fetches nothing)",
          "0-4294967295",
          [](options& o, std::string_view v) -> std::expected<void, std::string> {
            auto n = cli::detail::parse_integer<std::uint32_t>(v, 0, UINT32_MAX);
            if (!n) return std::unexpected(n.error());
            o.image_token_id = *n;
            return {};
          },
          {}},
      cli::choice<options>("--image-token-rule", "RULE", "placeholder tokens per image",
                           [](auto& o) -> auto& { return o.image_rules.rule; }, {"qwen2-vl", "fixed"}),
      cli::integer<options>("--image-fixed-tokens", "N", "tokens per image for the fixed rule",
                            [](auto& o) -> auto& { return o.image_rules.fixed_tokens; }, 1, 1000000),
  };
  return t;
}

const cli::option_table<options>& engine_options() {
  static const cli::option_table<options> t = {
      cli::integer<options>("--num-blocks", "N", "KV blocks per rank", [](auto& o) -> auto& { return o.engine.num_blocks; }, 1, 1u << 30),
      cli::integer<options>("--block-size", "N", "tokens per block", [](auto& o) -> auto& { return o.engine.block_size; }, 1, 4096),
      cli::integer<options>("--max-num-seqs", "N", "running sequences per rank; the rest wait",
                            [](auto& o) -> auto& { return o.engine.max_num_seqs; }, 1, 1u << 20),
      cli::integer<options>("--max-num-batched-tokens", "N",
                            "prompt tokens one step prefills at most (the rest wait, as vLLM's); 0 = no bound",
                            [](auto& o) -> auto& { return o.engine.max_num_batched_tokens; }, 0, 1u << 30),
      cli::integer<options>("--dp-size", "N", "data-parallel ranks, each with its own cache and publisher",
                            [](auto& o) -> auto& { return o.dp_size; }, 1, 64),
      cli::real<options>("--speedup", "X", "run X times faster than the timing model (every time below is divided by X)",
                         [](auto& o) -> auto& { return o.engine.timing.speedup; }, 1e-3, 1e6),
      cli::real<options>("--prefill-us-per-token", "X", "per uncached prompt token",
                         [](auto& o) -> auto& { return o.engine.timing.prefill_us_per_token; }, 0, 1e6),
      cli::real<options>("--step-base-us", "X", "fixed cost of a scheduler step",
                         [](auto& o) -> auto& { return o.engine.timing.step_base_us; }, 0, 1e7),
      cli::real<options>("--decode-us-per-seq", "X", "per sequence in the decode batch",
                         [](auto& o) -> auto& { return o.engine.timing.decode_us_per_sequence; }, 0, 1e6),
      cli::real<options>("--transfer-us-per-block", "X", "per KV block a decode worker pulls from a prefill worker",
                         [](auto& o) -> auto& { return o.engine.timing.transfer_us_per_block; }, 0, 1e6),
      cli::integer<options>("--die-after-tokens", "N",
                            "the process exits once one request has streamed N tokens (an engine killed mid-answer); "
                            "0 = never",
                            [](auto& o) -> auto& { return o.server.die_after_tokens; }, 0, 1000000),
      cli::integer<options>("--hybrid-sliding-window", "TOKENS",
                            "model a hybrid engine: a sliding-window KV group (group 1) of this window beside full "
                            "attention, published with vLLM's group_idx and kv_cache_spec_kind; 0 = none",
                            [](auto& o) -> auto& { return o.engine.hybrid.sliding_window_tokens; }, 0, 1u << 24),
      cli::flag_switch<options>("--hybrid-mamba",
                                "model a hybrid engine: a mamba KV group (group 2) keeping one state per prompt, at "
                                "its last full block (a quarter of --num-blocks of them)",
                                [](auto& o) -> auto& { return o.engine.hybrid.mamba; }),
      cli::integer<options>("--cpu-offload-blocks", "N",
                            "a host-memory KV tier of N blocks below the GPU cache, as vLLM's OffloadingConnector "
                            "keeps: evicted blocks are copied there (medium CPU) and loaded back at a transfer's "
                            "cost (--transfer-us-per-block) instead of computed; 0 = none",
                            [](auto& o) -> auto& { return o.engine.offload.cpu_blocks; }, 0, 1u << 30),
      cli::flag_switch<options>("--enable-prompt-tokens-details",
                                "report usage.prompt_tokens_details.cached_tokens, as vLLM does with this flag",
                                [](auto& o) -> auto& { return o.server.prompt_tokens_details; }),
      cli::flag_switch<options>("--no-token-ids",
                                "ignore return_token_ids: answers carry text alone (SGLang's OpenAI API, vLLM before 0.10.2)",
                                [](auto& o) -> auto& { return o.no_token_ids; }),
  };
  return t;
}

const cli::option_table<options>& event_options() {
  static const cli::option_table<options> t = {
      cli::text<options>("--kv-events-endpoint", "E",
                         "PUB endpoint, e.g. tcp://*:5557 (binds with * or ::, and ipc://PATH, connects otherwise, as "
                         "vLLM does); rank r uses port + r (ipc: PATH-r)",
                         [](auto& o) -> auto& { return o.events.endpoint; }, true),
      cli::text<options>("--replay-endpoint", "E", "ROUTER endpoint for replay, e.g. tcp://*:5600 (rank r: port + r)",
                         [](auto& o) -> auto& { return o.replay_endpoint; }, true),
      cli::text<options>("--topic", "T", "topic frame", [](auto& o) -> auto& { return o.events.topic; }),
      cli::choice<options>("--event-format", "F", "the engine whose wire format is published",
                           [](auto& o) -> auto& { return o.event_format; }, {"vllm-array", "vllm-map", "sglang"}),
      cli::flag_switch<options>("--bin-hashes", "send block hashes as 32-byte digests (vLLM with int hashes off)",
                                [](auto& o) -> auto& { return o.events.encoding.bin_hashes; }),
      cli::real<options>("--drop-batches-pct", "P", "do not send P% of batches live (they stay replayable)",
                         [](auto& o) -> auto& { return o.events.drop_pct; }, 0, 100),
      cli::integer<options>("--seed", "N", "seed of the drop decisions", [](auto& o) -> auto& { return o.events.seed; }, 0,
                            UINT64_MAX),
  };
  return t;
}

std::string usage() {
  return "Usage: kvrouter-mocker [options]\n\n"
         "A simulated vLLM / SGLang worker: the OpenAI HTTP API, a paged KV cache with prefix reuse, a\n"
         "timing model, and KV-cache events over ZeroMQ exactly as the engines publish them.\n\n"
         "HTTP:\n" + cli::options_help<options>(http_options()) +
         "Prompts (tokenized exactly as kvrouter does):\n" + cli::options_help<options>(prompt_options()) +
         "Engine:\n" + cli::options_help<options>(engine_options()) +
         "KV events (off unless --kv-events-endpoint is given):\n" + cli::options_help<options>(event_options()) +
         "  -h, --help                        this text\n\n"
         "Routes: POST /v1/completions, /v1/chat/completions; GET /v1/models, /health, /metrics (vLLM\n"
         "names: vllm:num_requests_running, vllm:prefix_cache_queries_total, ...); GET /mocker/cache (the\n"
         "true cache contents per rank); POST /mocker/restart (an engine restart); POST /mocker/faults\n"
         "(KV-event drops, broken streams, error events, dying: docs/mocker.md); GET /mocker/kv_transfer/ID (a prefill\n"
         "worker's leased blocks, for --role decode peers); GET /mocker/bootstrap/ROOM (an SGLang prefill\n"
         "worker's blocks of a room, on its bootstrap port); GET /mocker/pd (what the roles did).\n";
}

std::expected<options, std::string> parse(const std::vector<std::string>& args) {
  options o;
  cli::option_table<options> all = http_options();
  for (const auto* table : {&prompt_options(), &engine_options(), &event_options()}) all.insert(all.end(), table->begin(), table->end());
  if (auto ok = cli::parse_options<options>(all, args, o); !ok) return std::unexpected(ok.error());
  o.events.encoding.format = *parse_kv_event_format(o.event_format);
  if (o.image_token_id) {
    o.multimodal = o.image_rules;
    o.multimodal->image_token_id = *o.image_token_id;
  }
  o.server.kv_lease = std::chrono::seconds(o.kv_lease_secs);
  o.server.block_size = o.engine.block_size;
  o.server.token_ids = !o.no_token_ids;
  if (!o.replay_endpoint.empty() && o.events.endpoint.empty())
    return std::unexpected("--replay-endpoint needs --kv-events-endpoint");
  return o;
}

int run(const options& o) {
  std::shared_ptr<const tokenizer> text_tokenizer;
  if (!o.tokenizer_path.empty()) {
    auto loaded = tokenizer::load(o.tokenizer_path);
    if (!loaded) throw std::runtime_error(loaded.error().message);
    text_tokenizer = std::make_shared<const tokenizer>(std::move(*loaded));
  }
  std::shared_ptr<const chat_template> chat;
  if (!o.tokenizer_config_path.empty()) {
    auto loaded = chat_template::load(o.tokenizer_config_path);
    if (!loaded) throw std::runtime_error(loaded.error());
    chat = std::make_shared<const chat_template>(std::move(*loaded));
  }
  const prompt_tokenizer prompts(text_tokenizer, chat, o.multimodal);

  std::vector<std::unique_ptr<engine_loop>> ranks;
  for (std::uint32_t r = 0; r < o.dp_size; ++r) {
    std::unique_ptr<event_publisher> publisher;
    if (!o.events.endpoint.empty()) {
      publisher_settings events = o.events;
      events.endpoint = endpoint_with_port_offset(o.events.endpoint, static_cast<int>(r));
      events.replay_endpoint = endpoint_with_port_offset(o.replay_endpoint, static_cast<int>(r));
      events.seed = o.events.seed + r;
      if (o.dp_size > 1) events.dp_rank = r;
      publisher = std::make_unique<event_publisher>(events);
    }
    ranks.push_back(std::make_unique<engine_loop>(o.engine, std::move(publisher)));
  }

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts, so all inherit it

  http_server server(o.server, ranks, prompts);
  if (!o.port_file.empty()) {
    const std::string temporary = o.port_file + ".tmp";
    std::ofstream(temporary) << server.port();
    std::rename(temporary.c_str(), o.port_file.c_str());
  }
  std::cerr << fmt::format("kvrouter-mocker: {} on http://{}:{} ({} rank(s), {} blocks of {} tokens each{})\n",
                           o.server.model, o.server.host, server.port(), o.dp_size, o.engine.num_blocks,
                           o.engine.block_size,
                           o.events.endpoint.empty() ? "" : ", KV events on " + o.events.endpoint);
  std::thread signal_watcher([&server, signals] {
    int received = 0;
    sigwait(&signals, &received);
    server.stop();
  });
  server.run();
  signal_watcher.detach();  // it is blocked in sigwait only if the server stopped otherwise
  return 0;
}

}  // namespace
}  // namespace kvr::mocker

int main(int argc, char** argv) {
  return kvr::cli::run_tool("kvrouter-mocker", kvr::mocker::usage(), kvr::mocker::parse({argv + 1, argv + argc}),
                            [](const auto& options) { return kvr::mocker::run(options); });
}
