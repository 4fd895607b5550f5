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
#include "app/mocker/engine_loop.hpp"
#include "app/mocker/event_publisher.hpp"
#include "app/mocker/http_server.hpp"
#include "app/mocker/openai_mock.hpp"
#include "core/config/worker_spec.hpp"

namespace kvr::mocker {
namespace {

constexpr const char* usage = R"(Usage: kvrouter-mocker [options]

A simulated vLLM / SGLang worker: the OpenAI HTTP API, a paged KV cache with prefix reuse, a
timing model, and KV-cache events over ZeroMQ exactly as the engines publish them.

HTTP:
  --host ADDRESS               listen address (default 127.0.0.1)
  --port PORT                  listen port (default 8000; 0 = any free port)
  --port-file PATH             write the port there once listening (for scripts using --port 0)
  --model NAME                 the model name in answers and /v1/models (default mock-model)
  --threads N                  HTTP threads (default 1)
Prompts (tokenized exactly as kvrouter does):
  --tokenizer PATH             HuggingFace tokenizer.json (without it, text is split on spaces and
                               hashed, which no router can match: send token-id prompts instead)
  --tokenizer-config PATH      tokenizer_config.json or .jinja: chats are rendered with its template
                               (without it, as plain 'role: content' lines)
  --image-token-id N           a multimodal model: data-URI images of chats become their placeholder
                               tokens, hashed into their blocks and named in extra_keys, as kvrouter
                               computes them (URL images stay one token: the mocker fetches nothing)
  --image-token-rule RULE      qwen2-vl (default) or fixed      --image-fixed-tokens N (default 576)
Engine:
  --num-blocks N               KV blocks per rank (default 16384)
  --block-size N               tokens per block (default 16)
  --max-num-seqs N             running sequences per rank (default 256); the rest wait
  --dp-size N                  data-parallel ranks, each with its own cache and publisher (default 1)
Timing (all divided by --speedup):
  --speedup X                  run X times faster than the model below (default 1)
  --prefill-us-per-token X     per uncached prompt token (default 50)
  --step-base-us X             fixed cost of a scheduler step (default 2000)
  --decode-us-per-seq X        per sequence in the decode batch (default 150)
KV events (off unless --kv-events-endpoint is given):
  --kv-events-endpoint E       PUB endpoint, e.g. tcp://*:5557 (binds with * or ::, and ipc://PATH,
                               connects otherwise, as vLLM does); rank r uses port + r (ipc: PATH-r)
  --replay-endpoint E          ROUTER endpoint for replay, e.g. tcp://*:5600 (rank r: port + r)
  --topic T                    topic frame (default empty)
  --event-format F             vllm-array (default), vllm-map or sglang
  --bin-hashes                 send block hashes as 32-byte digests (vLLM with int hashes off)
  --drop-batches-pct P         do not send P% of batches live (they stay replayable)
  --seed N                     seed of the drop decisions (default 1)

Routes: POST /v1/completions, /v1/chat/completions; GET /v1/models, /health, /metrics (vLLM
names: vllm:num_requests_running, vllm:prefix_cache_queries_total, ...); GET /mocker/cache (the
true cache contents per rank); POST /mocker/restart (an engine restart); POST /mocker/faults
{"drop_batches_pct": P} (change the drop rate at run time).
)";

struct options {
  server_settings server;
  std::string port_file;
  std::string tokenizer_path;
  std::string tokenizer_config_path;
  std::optional<multimodal_card> multimodal;
  engine_settings engine;
  std::uint32_t dp_size = 1;
  publisher_settings events;
  std::string replay_endpoint;
};

template <class T>
bool parse_number(const std::string& text, T& out) {
  std::istringstream in(text);
  in >> out;
  return !in.fail() && in.eof();
}

std::expected<options, std::string> parse(const std::vector<std::string>& args) {
  options o;
  cli::flag_reader flags(args);
  while (flags.next()) {
    const std::string name = flags.name();
    if (name == "-h" || name == "--help") return std::unexpected("");
    if (name == "--bin-hashes") {
      o.events.encoding.bin_hashes = true;
      continue;
    }
    static const std::set<std::string, std::less<>> known = {
        "--bin-hashes", "--block-size", "--decode-us-per-seq", "--dp-size", "--drop-batches-pct",
        "--event-format", "--help", "--host", "--image-fixed-tokens", "--image-token-id",
        "--image-token-rule", "--kv-events-endpoint", "--max-num-seqs", "--model", "--num-blocks", "--port",
        "--port-file", "--prefill-us-per-token", "--replay-endpoint", "--seed", "--speedup", "--step-base-us",
        "--threads", "--tokenizer", "--tokenizer-config", "--topic"};
    if (!known.contains(name)) return std::unexpected("unknown flag " + name + " (see --help)");
    const auto value = flags.value();
    if (!value) return std::unexpected(name + " needs a value");
    const std::string& v = *value;
    bool ok = true;
    if (name == "--host") o.server.host = v;
    else if (name == "--port") ok = parse_number(v, o.server.port);
    else if (name == "--port-file") o.port_file = v;
    else if (name == "--model") o.server.model = v;
    else if (name == "--threads") ok = parse_number(v, o.server.threads);
    else if (name == "--tokenizer") o.tokenizer_path = v;
    else if (name == "--tokenizer-config") o.tokenizer_config_path = v;
    else if (name == "--image-token-id") {
      if (!o.multimodal) o.multimodal.emplace();
      ok = parse_number(v, o.multimodal->image_token_id);
    } else if (name == "--image-token-rule") {
      if (!o.multimodal) o.multimodal.emplace();
      o.multimodal->rule = v;
      ok = v == "qwen2-vl" || v == "fixed";
    } else if (name == "--image-fixed-tokens") {
      if (!o.multimodal) o.multimodal.emplace();
      ok = parse_number(v, o.multimodal->fixed_tokens) && o.multimodal->fixed_tokens > 0;
    }
    else if (name == "--num-blocks") ok = parse_number(v, o.engine.num_blocks) && o.engine.num_blocks > 0;
    else if (name == "--block-size") ok = parse_number(v, o.engine.block_size) && o.engine.block_size > 0;
    else if (name == "--max-num-seqs") ok = parse_number(v, o.engine.max_num_seqs) && o.engine.max_num_seqs > 0;
    else if (name == "--dp-size") ok = parse_number(v, o.dp_size) && o.dp_size > 0 && o.dp_size <= 64;
    else if (name == "--speedup") ok = parse_number(v, o.engine.timing.speedup) && o.engine.timing.speedup > 0;
    else if (name == "--prefill-us-per-token") ok = parse_number(v, o.engine.timing.prefill_us_per_token);
    else if (name == "--step-base-us") ok = parse_number(v, o.engine.timing.step_base_us);
    else if (name == "--decode-us-per-seq") ok = parse_number(v, o.engine.timing.decode_us_per_sequence);
    else if (name == "--kv-events-endpoint") o.events.endpoint = v;
    else if (name == "--replay-endpoint") o.replay_endpoint = v;
    else if (name == "--topic") o.events.topic = v;
    else if (name == "--event-format") {
      const auto format = parse_kv_event_format(v);
      if (!format) return std::unexpected("--event-format takes vllm-array, vllm-map or sglang (got " + v + ")");
      o.events.encoding.format = *format;
    } else if (name == "--drop-batches-pct") ok = parse_number(v, o.events.drop_pct) && o.events.drop_pct >= 0 && o.events.drop_pct <= 100;
    else if (name == "--seed") ok = parse_number(v, o.events.seed);
    else return std::unexpected("unknown flag " + name + " (see --help)");
    if (!ok) return std::unexpected(fmt::format("{}: bad value \"{}\"", name, v));
  }
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
  return kvr::cli::run_tool("kvrouter-mocker", kvr::mocker::usage, kvr::mocker::parse({argv + 1, argv + argc}),
                            [](const auto& options) { return kvr::mocker::run(options); });
}
