/// `kvrouter-bench`: the load generator every kvrouter performance claim is measured with. See
/// docs/bench.md.

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "app/bench/cluster.hpp"
#include "app/bench/replica_probe.hpp"
#include "app/bench/image_server.hpp"
#include "app/bench/load_client.hpp"
#include "app/bench/report.hpp"
#include "app/bench/simulate.hpp"
#include "app/flags.hpp"
#include "app/options.hpp"
#include "core/media/base64.hpp"
#include "core/loadgen/stats.hpp"
#include "core/loadgen/offered_load.hpp"
#include "core/loadgen/workload.hpp"

namespace kvr::bench {
namespace {

constexpr const char* commands_usage = R"(Usage:
  kvrouter-bench compare [--policies kv,round-robin,...] [--mockers N] [--mocker-flag F]... [--router-flag F]...
                         [--replicas N [--replica-sync on|off]] [--prefill N --decode M [--pd P,...]]
                         WORKLOAD [LOAD] [OUTPUT]
      Runs the same workload against each policy, each on a fresh local cluster (N kvrouter-mocker
      processes with KV events, kvrouter in front), and prints one table.
      Policies: kv, approx-kv, load-aware, round-robin, random, power-of-two, least-loaded, and
      kv-queue[:T] (kv with the admission queue, --busy-threshold T, default 1).
      With --rate-sweep R1,R2,...: one run per policy and rate, one table, one plot against load.
      With --replicas N: N routers in front of the mockers, requests spread over them in turn,
      sharing their bookings over a nats-server the bench starts (unless --replica-sync off);
      reports load imbalance, replica disagreement, sync lag and NATS messages/s beside the rest.
      With --prefill N --decode M: each policy also runs on a disaggregated cluster per protocol
      of --pd (vllm-nixl, sglang; default vllm-nixl), N prefill and M decode mockers, in the
      same table as the aggregated cluster of --mockers; its hit rate is the prefill pool's.
  kvrouter-bench run --url http://HOST:PORT [--router-pid PID] [--worker-metrics URL]... WORKLOAD [LOAD] [OUTPUT]
      Runs the workload against a router you started; hit rate from the workers' /metrics URLs,
      router CPU from /proc/PID.
  kvrouter-bench simulate [--policies P1,P2,...] [--mockers N] [--mocker-flag=F]... [--router-flag=F]...
                          [--kv-event-delay-ms MS] [--request-latency-ms MS] WORKLOAD [LOAD] [OUTPUT]
      compare's policies on a cluster in virtual time: the router's own core (index, bookings,
      selector) in front of the mocker's engine model, event-driven and deterministic, a
      whole trace in seconds. Token-id workloads, open loop, one aggregated router; the
      mocker flags of the engine model and router knob flags only. Confirm winners with compare.
  kvrouter-bench trace-ceiling FILE [--requests N] [--engines E --engine-blocks B [--block-size 16]]
      Prints a Mooncake trace's reuse ceiling: the share of its blocks seen earlier in the trace.
      With --engines: the prefix-cache hit rates (hit tokens / prompt tokens, as engines count
      them) of caches that never evict, of one LRU cache of E x B blocks (all engines as one)
      and of round-robin over E LRU caches of B blocks, the requests in arrival order.
)";

struct options {
  std::string command;
  std::string url;
  pid_t router_pid = -1;
  std::vector<std::string> worker_metrics;
  std::vector<std::string> policies = {"kv", "approx-kv", "load-aware", "round-robin", "random"};
  std::size_t mockers = 4;
  std::size_t replicas = 1;
  std::string replica_sync = "on";
  std::size_t prefill = 0;
  std::size_t decode = 0;
  std::vector<std::string> pd_protocols = {"vllm-nixl"};
  std::vector<std::string> mocker_flags;
  std::vector<std::string> router_flags;
  std::string trace;
  loadgen::trace_options trace_options;
  loadgen::shared_prefix_options synthetic;
  bool output_tokens_given = false;
  std::size_t max_requests = 0;
  double rate = 0;
  double target_utilization = 0;  ///< > 0: the rate derived from the mockers' timing model
  std::vector<double> rate_sweep;  ///< --rate-sweep: one run per rate (open loop, Poisson)
  std::size_t concurrency = 0;
  double duration = 0;
  std::string model;  ///< empty: compare uses mock-model, run asks the router's /v1/models
  std::string out, csv, plot;
  bool progress = true;
  std::string trace_file_for_ceiling;
  double kv_event_delay_ms = 1.0;  ///< simulate: KV events reach the router this long after their step
  /// simulate: router to engine, and tokens back, take this long (2 ms: what compare adds to the
  /// engines' own TTFT on this machine, docs/benchmarks.md)
  double request_latency_ms = 2.0;
  std::uint32_t ceiling_engines = 0;  ///< trace-ceiling --engines; 0 = the reuse ceiling alone
  std::uint64_t ceiling_engine_blocks = 65536;
  std::uint32_t ceiling_block_size = 16;
  loadgen::image_chat_options image_chat;
  bool images = false;
  std::string image_source = "url";
  bool image_data_uris = false;
  bool shared_prefix = false;  ///< --shared-prefix: the default workload, named
  bool text_chats = false;     ///< --chats: multi-turn text conversations
  std::uint32_t system_words = 300, question_words = 20;  ///< chat workloads (text and image)
  std::string tokenizer, tokenizer_config, image_token_id;
};

std::vector<std::string> split_commas(std::string_view text) {
  std::vector<std::string> out;
  std::stringstream in{std::string(text)};
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

using row = cli::option<options>;

const cli::option_table<options>& cluster_options() {
  static const cli::option_table<options> t = {
      row{"--policies", "LIST", "compare: the policies to run, comma-separated", {},
          [](options& o, std::string_view v) -> std::expected<void, std::string> {
            o.policies = split_commas(v);
            return {};
          },
          [](const options& o) { return fmt::format("{}", fmt::join(o.policies, ",")); }},
      cli::integer<options>("--mockers", "N", "compare: mockers per cluster", [](auto& o) -> auto& { return o.mockers; }, 1, 256),
      cli::integer<options>("--replicas", "N", "compare: router replicas per cluster, requests spread over them in turn",
                            [](auto& o) -> auto& { return o.replicas; }, 1, 16),
      cli::choice<options>("--replica-sync", "on|off", "compare: replicas share their bookings over NATS (a nats-server the bench starts)",
                           [](auto& o) -> auto& { return o.replica_sync; }, {"on", "off"}),
      cli::integer<options>("--prefill", "N", "compare: also run each policy on a disaggregated cluster with N prefill mockers (0 = no)",
                            [](auto& o) -> auto& { return o.prefill; }, 0, 128),
      cli::integer<options>("--decode", "M", "compare: the disaggregated cluster's decode mockers",
                            [](auto& o) -> auto& { return o.decode; }, 0, 128),
      row{"--pd", "LIST", "compare: the disaggregated clusters' protocols, comma-separated (vllm-nixl, sglang)", {},
          [](options& o, std::string_view v) -> std::expected<void, std::string> {
            o.pd_protocols = split_commas(v);
            for (const auto& p : o.pd_protocols)
              if (p != "vllm-nixl" && p != "sglang") return std::unexpected(fmt::format("unknown protocol \"{}\" (vllm-nixl or sglang)", p));
            return {};
          },
          [](const options& o) { return fmt::format("{}", fmt::join(o.pd_protocols, ",")); }},
      cli::each<options>("--mocker-flag", "F", "compare: a flag for every mocker", [](auto& o) -> auto& { return o.mocker_flags; }),
      cli::each<options>("--router-flag", "F", "compare: a flag for every router", [](auto& o) -> auto& { return o.router_flags; }),
      cli::text<options>("--url", "URL", "run: the router to load", [](auto& o) -> auto& { return o.url; }, true),
      cli::without_default(cli::integer<options>("--router-pid", "PID", "run: the router's process, for its CPU time",
                            [](auto& o) -> auto& { return o.router_pid; }, 1, 4194304)),
      cli::each<options>("--worker-metrics", "URL", "run: a worker's /metrics, for the hit rate",
                         [](auto& o) -> auto& { return o.worker_metrics; }),
  };
  return t;
}

const cli::option_table<options>& workload_options() {
  static const cli::option_table<options> t = {
      cli::text<options>("--trace", "FILE", "Mooncake trace JSONL (timestamp ms, input_length, output_length, hash_ids)",
                         [](auto& o) -> auto& { return o.trace; }, true),
      cli::integer<options>("--trace-block-tokens", "N", "tokens per hash id",
                            [](auto& o) -> auto& { return o.trace_options.block_tokens; }, 1, 1u << 20),
      cli::real<options>("--trace-speedup", "X", "divide the trace's timestamps by X",
                         [](auto& o) -> auto& { return o.trace_options.speedup; }, 1e-3, 1e6),
      cli::flag_switch<options>("--chats",
                                "text chat workload: per group a system prompt of --system-words, conversations of --turns "
                                "questions of --question-words, streamed from /v1/chat/completions (needs --tokenizer, --tokenizer-config)",
                                [](auto& o) -> auto& { return o.text_chats; }),
      cli::integer<options>("--system-words", "N", "chat workloads: words in each group's system prompt",
                            [](auto& o) -> auto& { return o.system_words; }, 1, 1u << 20),
      cli::integer<options>("--question-words", "N", "chat workloads: words in each question (and in a text chat's carried answers)",
                            [](auto& o) -> auto& { return o.question_words; }, 1, 1u << 20),
      cli::flag_switch<options>("--shared-prefix", "synthetic groups sharing a system prompt (the default workload)",
                                [](auto& o) -> auto& { return o.shared_prefix; }),
      cli::integer<options>("--groups", "N", "system prompts (shared-prefix and image workloads)",
                            [](auto& o) -> auto& { return o.synthetic.groups; }, 1, 1u << 20),
      cli::integer<options>("--prompts-per-group", "N", "prompts per system prompt",
                            [](auto& o) -> auto& { return o.synthetic.prompts_per_group; }, 1, 1u << 20),
      cli::integer<options>("--system-tokens", "N", "tokens of each system prompt",
                            [](auto& o) -> auto& { return o.synthetic.system_tokens; }, 0, 1u << 20),
      cli::integer<options>("--question-tokens", "N", "tokens of each question",
                            [](auto& o) -> auto& { return o.synthetic.question_tokens; }, 0, 1u << 20),
      row{"--output-tokens", "N", "tokens each answer streams (caps trace outputs too)", "1-1048576",
          [](options& o, std::string_view v) -> std::expected<void, std::string> {
            auto n = cli::detail::parse_integer<std::uint32_t>(v, 1, 1u << 20);
            if (!n) return std::unexpected(n.error());
            o.synthetic.output_tokens = *n;
            o.output_tokens_given = true;
            return {};
          },
          [](const options& o) { return std::to_string(o.synthetic.output_tokens); }},
      cli::integer<options>("--turns", "N", "> 1: each conversation comes back with its answer and a new question",
                            [](auto& o) -> auto& { return o.synthetic.turns; }, 1, 1024),
      row{"--images-per-request", "N",
          "image workload: chats of a system prompt, N images and a question, streamed from /v1/chat/completions",
          "1-1024",
          [](options& o, std::string_view v) -> std::expected<void, std::string> {
            auto n = cli::detail::parse_integer<std::uint32_t>(v, 1, 1024);
            if (!n) return std::unexpected(n.error());
            o.image_chat.images_per_request = *n;
            o.images = true;
            return {};
          },
          {}},
      cli::integer<options>("--distinct-images", "K", "images are drawn from K (repeats hit the router's cache)",
                            [](auto& o) -> auto& { return o.image_chat.distinct_images; }, 1, 1u << 20),
      cli::choice<options>("--image-source", "S", "url (served by the bench on loopback) or data (data: URIs)",
                           [](auto& o) -> auto& { return o.image_source; }, {"url", "data"}),
      cli::text<options>("--tokenizer", "PATH", "chat workloads: the router's and mockers' tokenizer.json",
                         [](auto& o) -> auto& { return o.tokenizer; }, true),
      cli::text<options>("--tokenizer-config", "PATH", "chat workloads: their chat template (images: one that loops over content parts)",
                         [](auto& o) -> auto& { return o.tokenizer_config; }, true),
      cli::text<options>("--image-token-id", "N", "with images: the template's image placeholder id (router --image-token-id)",
                         [](auto& o) -> auto& { return o.image_token_id; }, true),
      cli::integer<options>("--requests", "N", "send at most N requests; 0 = all", [](auto& o) -> auto& { return o.max_requests; }, 0,
                            SIZE_MAX),
      cli::real<options>("--kv-event-delay-ms", "MS", "simulate: KV events reach the router this long after the step that made them",
                         [](auto& o) -> auto& { return o.kv_event_delay_ms; }, 0, 1e6),
      cli::real<options>("--request-latency-ms", "MS",
                         "simulate: a request reaches its engine this long after the router decides, and its tokens reach router "
                         "and client this long after their step (HTTP, the proxy, the engines' wake-ups)",
                         [](auto& o) -> auto& { return o.request_latency_ms; }, 0, 1e6),
      cli::integer<options>("--engines", "E", "trace-ceiling: the bounds for E engines",
                            [](auto& o) -> auto& { return o.ceiling_engines; }, 1, 4096),
      cli::integer<options>("--engine-blocks", "B", "trace-ceiling: KV blocks per engine",
                            [](auto& o) -> auto& { return o.ceiling_engine_blocks; }, 1, std::uint64_t{1} << 32),
      cli::integer<options>("--block-size", "N", "trace-ceiling: tokens per KV block (a hash id's tokens are whole blocks)",
                            [](auto& o) -> auto& { return o.ceiling_block_size; }, 1, 1u << 16),
      cli::integer<options>("--seed", "N", "workload and arrival seed", [](auto& o) -> auto& { return o.synthetic.seed; }, 0, UINT64_MAX),
  };
  return t;
}

const cli::option_table<options>& load_options() {
  static const cli::option_table<options> t = {
      cli::without_default(cli::real<options>("--rate", "R", "open loop, Poisson arrivals at R requests/s (synthetic workloads: 20 when neither is given)",
                         [](auto& o) -> auto& { return o.rate; }, 1e-3, 1e6)),
      cli::without_default(cli::real<options>("--target-utilization", "U",
                         "compare and simulate: the rate (a trace's arrivals rescaled) at which the mockers would be busy U of the "
                         "time if nothing were cached, from their timing model (prefill per prompt token, a decode slot per output token)",
                         [](auto& o) -> auto& { return o.target_utilization; }, 1e-3, 100)),
      row{"--rate-sweep", "R1,R2,...", "one open-loop run per rate (requests/s), each on a fresh cluster: TTFT and goodput against offered load", {},
          [](options& o, std::string_view v) -> std::expected<void, std::string> {
            o.rate_sweep.clear();
            for (const std::string& item : split_commas(v)) {
              auto rate = cli::detail::parse_real(item, 1e-3, 1e6);
              if (!rate) return std::unexpected(rate.error());
              o.rate_sweep.push_back(*rate);
            }
            if (o.rate_sweep.empty()) return std::unexpected("--rate-sweep needs at least one rate");
            return {};
          },
          {}},
      cli::without_default(cli::integer<options>("--concurrency", "C", "closed loop, C requests in flight (a trace without either uses its timestamps)",
                            [](auto& o) -> auto& { return o.concurrency; }, 1, 100000)),
      cli::without_default(cli::real<options>("--duration", "S", "stop sending after S seconds", [](auto& o) -> auto& { return o.duration; }, 1e-3, 1e7)),
      cli::text<options>("--model", "NAME", "the model in requests (compare: mock-model; run: the router's only model, from /v1/models)",
                         [](auto& o) -> auto& { return o.model; }, true),
  };
  return t;
}

const cli::option_table<options>& output_options() {
  static const cli::option_table<options> t = {
      cli::text<options>("--out", "FILE.json",
                         "one object per policy: policy, requests, errors, rps, hit_rate, ttft_mean_ms, ttft_p50_ms, "
                         "ttft_p99_ms, itl_mean_ms, router_cpu_us_per_req, ...",
                         [](auto& o) -> auto& { return o.out; }, true),
      cli::text<options>("--csv", "FILE.csv", "the same as CSV", [](auto& o) -> auto& { return o.csv; }, true),
      cli::text<options>("--plot", "FILE.png", "TTFT distributions per policy (gnuplot)", [](auto& o) -> auto& { return o.plot; }, true),
      cli::flag_switch<options>("--no-progress", "no progress line", [](auto& o) -> auto& { return o.progress; }, false),
  };
  return t;
}

std::string usage() {
  return std::string(commands_usage) + "\nCluster and target:\n" + cli::options_help<options>(cluster_options()) +
         "Workload (token-id prompts to /v1/completions, streamed):\n" + cli::options_help<options>(workload_options()) +
         "Load:\n" + cli::options_help<options>(load_options()) + "Output:\n" + cli::options_help<options>(output_options()) +
         "  -h, --help                        this text\n";
}

std::expected<options, std::string> parse(const std::vector<std::string>& args) {
  options o;
  if (args.empty() || args[0] == "-h" || args[0] == "--help") return std::unexpected("");
  o.command = args[0];
  if (o.command != "compare" && o.command != "run" && o.command != "trace-ceiling" && o.command != "simulate")
    return std::unexpected("unknown command " + o.command + " (compare, run, simulate or trace-ceiling; see --help)");
  cli::option_table<options> all = cluster_options();
  for (const auto* table : {&workload_options(), &load_options(), &output_options()}) all.insert(all.end(), table->begin(), table->end());
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  auto ok = cli::parse_options<options>(all, rest, o, [](options& o, std::string_view arg) -> std::expected<void, std::string> {
    if (o.command != "trace-ceiling" || !o.trace_file_for_ceiling.empty())
      return std::unexpected(fmt::format("unexpected argument \"{}\" (see --help)", arg));
    o.trace_file_for_ceiling = std::string(arg);
    return {};
  });
  if (!ok) return std::unexpected(ok.error());
  o.image_data_uris = o.image_source == "data";
  if (o.command == "run" && o.url.empty()) return std::unexpected("run needs --url http://HOST:PORT");
  if (o.command == "trace-ceiling" && o.trace_file_for_ceiling.empty()) return std::unexpected("trace-ceiling needs a FILE");
  for (const auto& p : o.policies)
    if (policy_flags(p).empty()) return std::unexpected("unknown policy " + p);
  if (o.rate > 0 && o.concurrency > 0) return std::unexpected("--rate and --concurrency exclude each other");
  if (o.target_utilization > 0) {
    if (o.rate > 0 || o.concurrency > 0 || !o.rate_sweep.empty() || o.trace_options.speedup != 1.0)
      return std::unexpected("--target-utilization sets the rate: it excludes --rate, --concurrency, --rate-sweep and --trace-speedup");
    if (o.command != "compare" && o.command != "simulate")
      return std::unexpected("--target-utilization needs the mockers' timing model: compare or simulate");
    if (o.images || o.text_chats || o.prefill > 0)
      return std::unexpected("--target-utilization models aggregated token-id workloads (no chats, no images, no --prefill/--decode)");
  }
  if ((o.prefill > 0) != (o.decode > 0)) return std::unexpected("--prefill and --decode go together (a pool of each)");
  if (!o.rate_sweep.empty() && (o.rate > 0 || o.concurrency > 0))
    return std::unexpected("--rate-sweep sets the rate of each run: it excludes --rate and --concurrency");
  if (o.images && (o.tokenizer.empty() || o.tokenizer_config.empty() || o.image_token_id.empty()))
    return std::unexpected("an image workload needs --tokenizer, --tokenizer-config and --image-token-id");
  if (o.text_chats && o.images) return std::unexpected("--chats and --images-per-request are two workloads: choose one");
  if (o.text_chats && !o.trace.empty()) return std::unexpected("--chats and --trace are two workloads: choose one");
  if (o.text_chats && o.command != "run" && (o.tokenizer.empty() || o.tokenizer_config.empty()))
    return std::unexpected("--chats needs --tokenizer and --tokenizer-config (router and mockers render the chats)");
  return o;
}

std::expected<std::string, std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::unexpected("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// What the requests are, in a line (the plot's title, the JSON's `workload`).
std::string describe_workload(const options& o, std::size_t requests) {
  std::string what;
  if (o.images)
    what = fmt::format("image chats, {} image(s) each from {} distinct", o.image_chat.images_per_request, o.image_chat.distinct_images);
  else if (o.text_chats)
    what = fmt::format("text chats: {} groups x {} conversations x {} turns, {}-word system prompts, {}-word questions, {} output",
                       o.synthetic.groups, o.synthetic.prompts_per_group, std::max<std::uint32_t>(o.synthetic.turns, 1),
                       o.system_words, o.question_words, o.synthetic.output_tokens);
  else if (!o.trace.empty())
    what = fmt::format("trace {}", std::filesystem::path(o.trace).filename().string());
  else
    what = fmt::format("shared-prefix: {} groups x {} prompts, {}+{} prompt tokens, {} output", o.synthetic.groups,
                       o.synthetic.prompts_per_group, o.synthetic.system_tokens, o.synthetic.question_tokens,
                       o.synthetic.output_tokens);
  what += fmt::format(", {} requests", requests);
  if (o.concurrency > 0) what += fmt::format(", {} in flight", o.concurrency);
  else if (o.rate > 0) what += fmt::format(", {} req/s", o.rate);
  return what;
}

std::expected<std::vector<loadgen::request_spec>, std::string> build_workload(const options& o,
                                                                               const image_server* images) {
  std::vector<loadgen::request_spec> requests;
  if (o.text_chats) {
    requests = loadgen::text_chats({.groups = o.synthetic.groups,
                                    .conversations_per_group = o.synthetic.prompts_per_group,
                                    .system_words = o.system_words,
                                    .question_words = o.question_words,
                                    .answer_words = o.question_words,
                                    .turns = o.synthetic.turns,
                                    .output_tokens = o.synthetic.output_tokens,
                                    .seed = o.synthetic.seed});
    if (o.max_requests > 0 && requests.size() > o.max_requests) requests.resize(o.max_requests);
  } else if (o.images) {
    loadgen::image_chat_options chats = o.image_chat;
    chats.system_words = o.system_words;
    chats.question_words = o.question_words;
    chats.groups = o.synthetic.groups;
    chats.prompts_per_group = o.synthetic.prompts_per_group;
    chats.output_tokens = o.synthetic.output_tokens;
    chats.seed = o.synthetic.seed;
    requests = loadgen::image_chats(chats, [&](std::size_t k) {
      if (images != nullptr) return images->url(k);
      const auto png = loadgen::workload_png(k);
      return "data:image/png;base64," + base64_encode(png);
    });
    if (o.max_requests > 0 && requests.size() > o.max_requests) requests.resize(o.max_requests);
  } else if (!o.trace.empty()) {
    auto text = read_file(o.trace);
    if (!text) return std::unexpected(text.error());
    loadgen::trace_options trace = o.trace_options;
    trace.max_requests = o.max_requests;
    if (o.output_tokens_given) trace.max_output_tokens = o.synthetic.output_tokens;
    auto parsed = loadgen::mooncake_trace(*text, trace);
    if (!parsed) return std::unexpected(o.trace + ": " + parsed.error());
    requests = std::move(*parsed);
  } else {
    requests = loadgen::shared_prefix(o.synthetic);
    if (o.max_requests > 0 && requests.size() > o.max_requests) requests.resize(o.max_requests);
  }
  if (o.target_utilization > 0) {
    mocker::engine_settings engine;
    try {
      engine = engine_model(o.mocker_flags, false);
    } catch (const std::exception& e) {
      return std::unexpected(e.what());
    }
    const double rate = loadgen::rate_for_utilization(requests, engine.timing, static_cast<std::uint32_t>(o.mockers), o.target_utilization);
    if (rate <= 0) return std::unexpected("--target-utilization: the workload has no work to scale");
    if (!o.trace.empty()) loadgen::scale_arrivals(requests, rate);
    else loadgen::poisson_arrivals(requests, rate, o.synthetic.seed);
    std::cerr << fmt::format("kvrouter-bench: --target-utilization {}: {:.1f} requests/s ({:.1f} engine-ms of cold work each, {} mockers)\n",
                             o.target_utilization, rate, loadgen::mean_cold_work_us(requests, engine.timing) / 1000, o.mockers);
    return requests;
  }
  const bool uses_trace_times = !o.trace.empty() && o.rate == 0 && o.concurrency == 0;
  if (!uses_trace_times && o.concurrency == 0) loadgen::poisson_arrivals(requests, o.rate > 0 ? o.rate : 20.0, o.synthetic.seed);
  return requests;
}

struct worker_counters {
  double hits = 0, queries = 0;
};

/// The router's image-dimension cache counters (all sets).
std::pair<double, double> media_counters(const std::string& host, const std::string& port) {
  const std::string text = http_get("http://" + host + ":" + port + "/metrics");
  return {loadgen::prometheus_sum(text, "kvrouter_set_media_cache_hits_total"),
          loadgen::prometheus_sum(text, "kvrouter_set_media_lookups_total")};
}

worker_counters read_worker_counters(const std::vector<std::string>& metrics_urls) {
  worker_counters c;
  for (const std::string& url : metrics_urls) {
    const std::string text = http_get(url);
    c.hits += loadgen::prometheus_sum(text, "vllm:prefix_cache_hits_total");
    c.queries += loadgen::prometheus_sum(text, "vllm:prefix_cache_queries_total");
  }
  return c;
}

/// One measured run against a router at `port` (and, when known, its pid and workers), or
/// against router replicas (`replicas`: their pids and ports; requests spread over them).
struct replica_targets {
  std::vector<pid_t> pids;
  std::vector<std::uint16_t> ports;
  bool sync = false;
};
policy_report measure(const options& o, const std::string& label, const std::string& host, const std::string& port,
                      pid_t router_pid, const std::vector<std::string>& metrics_urls,
                      const std::vector<loadgen::request_spec>& requests, const replica_targets& replicas = {}) {
  load_settings load;
  load.host = host;
  load.port = port;
  for (std::uint16_t p : replicas.ports) load.ports.push_back(std::to_string(p));
  std::vector<pid_t> pids = replicas.pids;
  if (pids.empty() && router_pid > 0) pids.push_back(router_pid);
  auto cpu_of = [&] {
    double total = 0;
    for (pid_t pid : pids) {
      const double cpu = process_cpu_seconds(pid);
      if (cpu < 0) return -1.0;
      total += cpu;
    }
    return pids.empty() ? -1.0 : total;
  };
  load.model = o.model;
  load.concurrency = o.concurrency;
  load.duration_s = o.duration;
  load.progress = o.progress;
  load.label = label;
  const worker_counters before = read_worker_counters(metrics_urls);
  const auto media_before = media_counters(host, port);
  const double cpu_before = cpu_of();
  std::optional<replica_probe> probe;
  // Only for several replicas: its 10 reads a second of /v1/router/sets cost the router CPU, which
  // would show in a lone router's CPU per request.
  if (replicas.ports.size() > 1) probe.emplace(replicas.ports, replicas.sync);
  double wall = 0;
  std::vector<request_result> results = run_load(load, requests, wall);
  const double cpu_after = cpu_of();
  const worker_counters after = read_worker_counters(metrics_urls);
  const auto media_after = media_counters(host, port);
  policy_report report = summarize_run(label, results, wall);
  if (probe) report.replication = probe->finish(wall);
  if (media_after.second > media_before.second)
    report.dims_cache_hit_rate = (media_after.first - media_before.first) / (media_after.second - media_before.second);
  if (!metrics_urls.empty() && after.queries > before.queries)
    report.hit_rate = (after.hits - before.hits) / (after.queries - before.queries);
  if (cpu_before >= 0 && cpu_after >= 0 && report.requests > 0)
    report.router_cpu_us_per_req = (cpu_after - cpu_before) * 1e6 / static_cast<double>(report.requests);
  return report;
}

/// `run` without --model: the router's only model (its /v1/models).
std::string router_model(const std::string& host, const std::string& port) {
  const std::string text = http_get("http://" + host + ":" + port + "/v1/models");
  const auto models = nlohmann::json::parse(text, nullptr, false);
  std::vector<std::string> ids;
  if (models.is_object() && models.contains("data") && models["data"].is_array())
    for (const auto& m : models["data"])
      if (m.is_object() && m.contains("id") && m["id"].is_string()) ids.push_back(m["id"].get<std::string>());
  if (ids.size() == 1) return ids.front();
  if (ids.empty()) throw std::runtime_error("cannot read the router's models from http://" + host + ":" + port + "/v1/models; give --model");
  throw std::runtime_error(fmt::format("the router serves {} models ({}); give --model", ids.size(), fmt::join(ids, ", ")));
}

/// Whether `flags` (as --mocker-flag passes them) set `name`, as `--name V` or `--name=V`.
bool sets_flag(const std::vector<std::string>& flags, std::string_view name) {
  return std::ranges::any_of(flags, [name](const std::string& f) { return f == name || f.starts_with(std::string(name) + "="); });
}

/// compare's default caches: about 1.25x the workload's working set over the whole cluster, so a
/// router that places prefixes well keeps them all and one that scatters them evicts (every
/// cache holding every prefix would show no difference between policies).
std::uint32_t default_mocker_blocks(const std::vector<loadgen::request_spec>& requests, std::size_t mockers,
                                    std::uint32_t block_size) {
  const std::size_t working_set = loadgen::distinct_prompt_blocks(requests, block_size);
  std::size_t largest = 0;
  for (const auto& r : requests) largest = std::max<std::size_t>(largest, (r.prompt.size() + r.max_tokens) / block_size + 2);
  const std::size_t share = (working_set * 5 / 4 + mockers - 1) / mockers;
  return static_cast<std::uint32_t>(std::clamp<std::size_t>(std::max(share, 2 * largest), 64, 1u << 24));
}

std::string sibling_binary(const std::string& name) {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / name).string();
}

int run(const options& o) {
  if (o.command == "trace-ceiling") {
    auto text = read_file(o.trace_file_for_ceiling);
    if (!text) throw std::runtime_error(text.error());
    auto ceiling = loadgen::trace_reuse_ceiling(*text, o.max_requests);
    if (!ceiling) throw std::runtime_error(ceiling.error());
    if (o.ceiling_engines == 0) {
      std::cout << fmt::format("{:.4f}\n", *ceiling);
      return 0;
    }
    auto bounds = loadgen::trace_cache_bounds(*text, {.engines = o.ceiling_engines,
                                                      .engine_blocks = o.ceiling_engine_blocks,
                                                      .block_size = o.ceiling_block_size,
                                                      .block_tokens = o.trace_options.block_tokens,
                                                      .max_requests = o.max_requests});
    if (!bounds) throw std::runtime_error(bounds.error());
    std::cout << fmt::format(
        "{} requests, {} prompt tokens, a working set of {} blocks of {} tokens\n"
        "reuse ceiling (hash ids seen earlier): {:.4f}\n"
        "caches that never evict (hit tokens / prompt tokens): {:.4f}\n"
        "pooled, one LRU cache of {} x {} blocks: {:.4f}\n"
        "round-robin over {} LRU caches of {} blocks: {:.4f}\n",
        bounds->requests, bounds->prompt_tokens, bounds->distinct_blocks, o.ceiling_block_size, *ceiling, bounds->unbounded,
        o.ceiling_engines, o.ceiling_engine_blocks, bounds->pooled, o.ceiling_engines, o.ceiling_engine_blocks,
        bounds->round_robin);
    return 0;
  }
  std::unique_ptr<image_server> images;
  if (o.images && !o.image_data_uris) {
    std::vector<std::vector<std::uint8_t>> pngs;
    for (std::size_t k = 0; k < o.image_chat.distinct_images; ++k) pngs.push_back(loadgen::workload_png(k));
    images = std::make_unique<image_server>(std::move(pngs));
  }
  auto requests = build_workload(o, images.get());
  if (!requests) throw std::runtime_error(requests.error());
  std::size_t prompt_tokens = 0;
  for (const auto& r : *requests) prompt_tokens += r.prompt.size();
  if (o.text_chats)
    std::cerr << fmt::format("kvrouter-bench: {} text chat requests ({} conversations x {} turns)\n", requests->size(),
                             o.synthetic.groups * o.synthetic.prompts_per_group, std::max<std::uint32_t>(o.synthetic.turns, 1));
  else if (o.images)
    std::cerr << fmt::format("kvrouter-bench: {} chat requests with {} image(s) each, from {} distinct images ({})\n",
                             requests->size(), o.image_chat.images_per_request, o.image_chat.distinct_images,
                             o.image_data_uris ? "data URIs" : "URLs on a loopback image server");
  else
    std::cerr << fmt::format("kvrouter-bench: {} requests, {:.0f} prompt tokens on average\n", requests->size(),
                             requests->empty() ? 0.0 : static_cast<double>(prompt_tokens) / requests->size());
  std::vector<policy_report> reports;
  // One run per rate of the sweep (the arrivals redrawn at that rate), or one run.
  const std::vector<double> rates = o.rate_sweep.empty() ? std::vector<double>{0.0} : o.rate_sweep;
  auto workload_at = [&](double rate) {
    if (rate == 0) return *requests;
    options at = o;
    at.rate = rate;
    auto built = build_workload(at, images.get());
    if (!built) throw std::runtime_error(built.error());
    return std::move(*built);
  };
  options resolved = o;  // the model the requests name, once known
  if (o.command == "simulate") {
    if (o.concurrency > 0 || !o.rate_sweep.empty() || o.prefill > 0 || o.replicas > 1 || o.images || o.text_chats)
      throw std::runtime_error("simulate replays an open-loop token-id workload on one aggregated router (no --concurrency, "
                               "--rate-sweep, --prefill/--decode, --replicas, chats or images)");
    simulate_settings sim{.policies = o.policies, .engines = o.mockers, .mocker_flags = o.mocker_flags,
                          .router_flags = o.router_flags, .kv_event_delay_ms = o.kv_event_delay_ms,
                          .request_latency_ms = o.request_latency_ms};
    if (!sets_flag(sim.mocker_flags, "--num-blocks"))
      sim.mocker_flags.insert(sim.mocker_flags.end(), {"--num-blocks", std::to_string(default_mocker_blocks(*requests, o.mockers, 16))});
    reports = simulate_policies(sim, *requests);
  } else if (o.command == "run") {
    const auto colon = o.url.rfind(':');
    const std::string host = o.url.substr(7, colon - 7);
    std::string port = o.url.substr(colon + 1);
    if (auto slash = port.find('/'); slash != std::string::npos) port.resize(slash);
    if (resolved.model.empty()) resolved.model = router_model(host, port);
    std::vector<std::string> metrics;
    for (const auto& w : o.worker_metrics) metrics.push_back(w.find("/metrics") == std::string::npos ? w + "/metrics" : w);
    for (double rate : rates) {
      reports.push_back(measure(resolved, "run", host, port, o.router_pid, metrics, workload_at(rate)));
      reports.back().offered_rate = rate;
    }
  } else {
    if (resolved.model.empty()) resolved.model = "mock-model";
    std::vector<std::string> mocker_flags = o.mocker_flags;
    if (!sets_flag(mocker_flags, "--num-blocks") && !o.images && !o.text_chats) {
      const std::uint32_t blocks = default_mocker_blocks(*requests, o.mockers, 16);
      mocker_flags.insert(mocker_flags.end(), {"--num-blocks", std::to_string(blocks)});
      std::cerr << fmt::format("kvrouter-bench: {} mockers x {} KV blocks each; the prompts span {} distinct blocks "
                               "(--mocker-flag=--num-blocks --mocker-flag=N to change)\n",
                               o.mockers, blocks, loadgen::distinct_prompt_blocks(*requests, 16));
    }
    char scratch[] = "/tmp/kvrouter-bench-XXXXXX";
    if (mkdtemp(scratch) == nullptr) throw std::runtime_error("cannot create a scratch directory");
    // The aggregated cluster, then (--prefill, --decode) one disaggregated cluster per protocol.
    std::vector<std::string> shapes = {""};
    if (o.prefill > 0) shapes.insert(shapes.end(), o.pd_protocols.begin(), o.pd_protocols.end());
    for (const std::string& policy : o.policies)
      for (const std::string& pd : shapes)
        for (double rate : rates) {
          cluster_settings settings;
          if (!pd.empty()) {
            settings.prefill = o.prefill;
            settings.decode = o.decode;
            settings.pd = pd;
          }
          settings.kvrouter = sibling_binary("kvrouter");
          settings.mocker = sibling_binary("kvrouter-mocker");
          settings.mockers = o.mockers;
          settings.mocker_flags = mocker_flags;
          settings.router_flags = o.router_flags;
          if (o.images || o.text_chats) {
            for (const std::string& flag : {std::string("--tokenizer"), o.tokenizer, std::string("--tokenizer-config"), o.tokenizer_config}) {
              settings.router_flags.push_back(flag);
              settings.mocker_flags.push_back(flag);
            }
          }
          if (o.images) {
            settings.router_flags.insert(settings.router_flags.end(), {"--image-token-id", o.image_token_id, "--media-allow-private"});
            settings.mocker_flags.insert(settings.mocker_flags.end(), {"--image-token-id", o.image_token_id});
          }
          settings.policy = policy;
          settings.model = resolved.model;
          settings.replicas = o.replicas;
          settings.replica_sync = o.replica_sync == "on";
          settings.workdir = fmt::format("{}/run-{}", scratch, reports.size());  // its own logs, ports and sockets
          local_cluster cluster(settings);
          std::vector<std::string> metrics;
          for (const auto& url : cluster.prefix_cache_urls()) metrics.push_back(url + "/metrics");
          const std::string shape = pd.empty() ? policy : fmt::format("{} {}P+{}D {}", policy, o.prefill, o.decode, pd);
          const std::string label = rate > 0 ? fmt::format("{} @{}", shape, rate) : shape;
          const replica_targets targets{cluster.router_pids(), cluster.router_ports(), settings.replicas > 1 && settings.replica_sync};
          reports.push_back(measure(resolved, label, "127.0.0.1", std::to_string(cluster.router_ports().front()), -1, metrics,
                                    workload_at(rate), targets));
          reports.back().policy = shape;
          reports.back().offered_rate = rate;
        }
    std::filesystem::remove_all(scratch);
  }
  const std::string workload = describe_workload(o, requests->size());
  print_table(reports);
  if (!o.out.empty()) write_json(reports, o.out, workload);
  if (!o.csv.empty()) write_csv(reports, o.csv);
  if (!o.plot.empty() && write_plot(reports, o.plot, workload)) std::cout << "plot: " << o.plot << "\n";
  std::size_t errors = 0;
  for (const auto& r : reports) errors += r.errors;
  return errors == 0 ? 0 : 3;
}

}  // namespace
}  // namespace kvr::bench

int main(int argc, char** argv) {
  return kvr::cli::run_tool("kvrouter-bench", kvr::bench::usage(), kvr::bench::parse({argv + 1, argv + argc}),
                            [](const auto& options) { return kvr::bench::run(options); });
}
