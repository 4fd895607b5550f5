// Load test of the KV-event path: publishers in this process send vLLM-shaped batches over
// loopback TCP at a fixed rate of block events; the router side (kv_subscriber thread + the
// set's CAF scorer) consumes them. Reports whether the router kept up (no gaps, drained right
// after the publishers stopped) and its CPU per block event.
//
//   kvr_bench_kv_subscriber_load [--rate BLOCK_EVENTS_PER_S] [--seconds S] [--block-size N]
//                                [--blocks-per-event N] [--workers N] [--decoders N]
//                                [--requests-per-step N]
//
// --decoders N shares the publishers out over N subscriber threads as the router does
// (--kv-decoders). A rate beyond what the router sustains shows its capacity: the achieved
// applied rate is block events over the time until the last batch was applied.
//
// --requests-per-step N publishes decode steps instead (bench/micro/decode_steps.hpp): each
// batch N one-block events, each the child of the same request's block in the worker's
// previous batch, and the removal of the N blocks stored 256 batches earlier.

#include <dirent.h>
#include <pthread.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "actors/sources/kv_subscriber.hpp"
#include "actors/pipeline/runtime.hpp"
#include "actors/pipeline/scorer.hpp"
#include "bench/micro/decode_steps.hpp"
#include "bench/micro/kv_encode.hpp"
#include "bench/micro/workload.hpp"

namespace {

using namespace kvr;
using clock_type = std::chrono::steady_clock;

/// CPU seconds of every thread of this process, by thread name (/proc/self/task/*/stat).
std::map<std::string, double> cpu_by_thread_name() {
  std::map<std::string, double> out;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return out;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream stat(std::string("/proc/self/task/") + entry->d_name + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string field;
    double utime = 0, stime = 0;
    for (int i = 3; rest >> field; ++i) {
      if (i == 14) utime = std::stod(field);
      if (i == 15) {
        stime = std::stod(field);
        break;
      }
    }
    out[line.substr(open + 1, close - open - 1)] += (utime + stime) / ticks;
  }
  closedir(dir);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  double rate = 100000, seconds = 10;
  std::uint32_t block_size = 16, blocks = 8, workers = 4, decoders = 1, requests_per_step = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const double value = std::stod(argv[i + 1]);
    if (flag == "--rate") rate = value;
    else if (flag == "--seconds") seconds = value;
    else if (flag == "--block-size") block_size = static_cast<std::uint32_t>(value);
    else if (flag == "--blocks-per-event") blocks = static_cast<std::uint32_t>(value);
    else if (flag == "--workers") workers = static_cast<std::uint32_t>(value);
    else if (flag == "--decoders") decoders = static_cast<std::uint32_t>(value);
    else if (flag == "--requests-per-step") requests_per_step = static_cast<std::uint32_t>(value);
    else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }

  // Each batch stores one fresh sequence of `blocks` blocks and removes the one stored 256
  // batches earlier, or (decode steps) stores one block for each of `requests_per_step`
  // requests and removes the step's 256 batches earlier: the index stays the same size.
  constexpr std::size_t pool = 4096, lag = 256;
  std::vector<std::vector<std::uint8_t>> payloads;
  if (requests_per_step > 0) {
    const bench::decode_steps shape(block_size, requests_per_step, pool, 1);
    for (std::size_t i = 0; i < pool; ++i) {
      std::vector<kv_event> events = shape.steps[i].events;
      if (i >= lag) events.push_back(shape.removals[i - lag].events.front());
      payloads.push_back(bench::encode_batch(events));
    }
  } else {
    for (std::size_t i = 0; i < pool; ++i) {
      kv_stored stored = bench::stored_event(bench::random_tokens(blocks * block_size, i), block_size, 0, blocks, 1000 + i);
      kv_stored earlier = bench::stored_event(bench::random_tokens(blocks * block_size, (i + pool - lag) % pool), block_size,
                                              0, blocks, 1000 + (i + pool - lag) % pool);
      std::vector<kv_event> events{stored};
      if (i >= lag) events.emplace_back(kv_removed{earlier.block_hashes});
      payloads.push_back(bench::encode_batch(events));
    }
  }
  const double block_events_per_batch = 2.0 * (requests_per_step > 0 ? requests_per_step : blocks);

  // The publishers' ZMQ I/O threads are named "9/ZMQbg/..." so their CPU is not the router's.
  zmq::context_t context;
  zmq_ctx_set(context.handle(), ZMQ_THREAD_NAME_PREFIX, 9);
  std::vector<zmq::socket_t> pubs;
  kv_subscriber_settings settings;
  for (std::uint32_t w = 0; w < workers; ++w) {
    zmq::socket_t& pub = pubs.emplace_back(context, zmq::socket_type::pub);
    pub.set(zmq::sockopt::sndhwm, 100000);
    pub.bind("tcp://127.0.0.1:*");
    settings.publishers.push_back({.index = w, .name = "w" + std::to_string(w),
                                   .endpoint = pub.get(zmq::sockopt::last_endpoint), .replay_endpoint = {}, .topic = {}});
  }

  caf::actor_system_config caf_config;
  configure_actor_system(caf_config, 1);
  caf::actor_system system{caf_config};
  router_config config;
  config.block_size = block_size;
  scorer_settings scorer_config{.routing = {.config = config}};
  for (const auto& p : settings.publishers) scorer_config.routing.worker_names.push_back(p.name);
  const scorer_actor scorer = spawn_scorer(system, scorer_config).actor;
  std::vector<std::shared_ptr<kv_subscriber>> subscribers;
  std::vector<caf::actor> drivers;
  for (auto& share : share_out_publishers(settings.publishers, decoders)) {
    kv_subscriber_settings shard = settings;
    shard.publishers = std::move(share);
    subscribers.push_back(
        std::make_shared<kv_subscriber>(shard, [scorer](kv_updates updates) { caf::anon_send(scorer, std::move(updates)); }));
    drivers.push_back(spawn_component_driver(system, subscribers.back(), "kvr-kv-sub"));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // SUB sockets connect

  const double batches_per_second = rate / block_events_per_batch;
  const auto total_batches = static_cast<std::uint64_t>(batches_per_second * seconds);
  const auto cpu_before = cpu_by_thread_name();
  const auto start = clock_type::now();
  std::thread publisher([&] {
    pthread_setname_np(pthread_self(), "publisher");
    std::vector<std::uint64_t> seq(workers, 0);
    for (std::uint64_t b = 0; b < total_batches; ++b) {
      std::this_thread::sleep_until(start + std::chrono::duration<double>(static_cast<double>(b) / batches_per_second));
      const std::uint32_t w = static_cast<std::uint32_t>(b % workers);
      std::uint64_t be = 0;
      for (int i = 0; i < 8; ++i) be |= ((seq[w] >> (8 * i)) & 0xFF) << (8 * (7 - i));
      ++seq[w];
      const auto& payload = payloads[(b / workers) % pool];
      pubs[w].send(zmq::message_t(), zmq::send_flags::sndmore);
      pubs[w].send(zmq::message_t(&be, 8), zmq::send_flags::sndmore);
      pubs[w].send(zmq::message_t(payload.data(), payload.size()), zmq::send_flags::none);
    }
  });
  publisher.join();
  const auto published_at = clock_type::now();

  // Drained: every published batch received by the subscriber and applied by the scorer.
  auto received = [&] {
    std::uint64_t n = 0;
    for (const auto& subscriber : subscribers)
      for (const auto& s : subscriber->stats()) n += s.live_batches;
    return n;
  };
  while (received() < total_batches && clock_type::now() - published_at < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  caf::scoped_actor self{system};
  nlohmann::json index;
  self->request(scorer, std::chrono::seconds(30), dump_index_atom_v).receive(
      [&](const std::string& dump) { index = nlohmann::json::parse(dump); }, [](const caf::error&) {});
  const auto drained_at = clock_type::now();
  nlohmann::json threads = nlohmann::json::object();
  double router_cpu = 0;
  for (const auto& [name, cpu] : cpu_by_thread_name()) {
    const double used = cpu - (cpu_before.contains(name) ? cpu_before.at(name) : 0.0);
    if (name == "publisher" || name.starts_with("9/")) continue;
    router_cpu += used;
    threads[name] = used;
  }
  for (const caf::actor& driver : drivers) caf::anon_send_exit(driver, caf::exit_reason::user_shutdown);

  std::uint64_t gaps = 0, decode_errors = 0, applied_batches = 0;
  for (const auto& subscriber : subscribers)
    for (const auto& s : subscriber->stats()) {
      gaps += s.sequence.gaps;
      decode_errors += s.decode_errors;
    }
  for (const auto& w : index["workers"]) applied_batches += w["events"]["batches"].get<std::uint64_t>();
  const double elapsed = std::chrono::duration<double>(published_at - start).count();
  const double block_events = static_cast<double>(total_batches) * block_events_per_batch;
  nlohmann::json report{
      {"target_block_events_per_s", rate},
      {"decoders", subscribers.size()},
      {"shape", requests_per_step > 0 ? "decode steps of " + std::to_string(requests_per_step) + " one-block events"
                                      : std::to_string(blocks) + " blocks per event"},
      {"achieved_block_events_per_s", block_events / elapsed},
      {"applied_block_events_per_s",
       block_events / std::chrono::duration<double>(drained_at - start).count()},
      {"batches_published", total_batches},
      {"batches_applied", applied_batches},
      {"gaps", gaps},
      {"decode_errors", decode_errors},
      {"drain_ms_after_publishers_stopped", std::chrono::duration<double, std::milli>(drained_at - published_at).count()},
      {"router_cpu_core_share", router_cpu / elapsed},
      {"router_cpu_us_per_block_event", router_cpu * 1e6 / block_events},
      {"index_blocks", index["total_blocks"]},
      {"router_cpu_seconds_by_thread", threads},
  };
  std::cout << report.dump(1) << std::endl;
  self->send_exit(scorer, caf::exit_reason::user_shutdown);
  return applied_batches == total_batches && gaps == 0 ? 0 : 1;
}
