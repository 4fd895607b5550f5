/// `kvrouter kv-dump`: shows what engines publish, decoded as the router decodes it.
///
///   kvrouter kv-dump --connect tcp://host:5557 [--topic T] [--replay tcp://host:5600 --from N]
///                    [--count N] [--duration SECONDS]
///   kvrouter kv-dump --hex < payloads.txt      (one payload per line, as hex)

#include <chrono>
#include <iostream>

#include <nlohmann/json.hpp>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "core/kv/kv_event_json.hpp"
#include "core/kv/kv_wire.hpp"

namespace kvr::cli {
namespace {

constexpr const char* kv_dump_usage =
    "Usage: kvrouter kv-dump --connect tcp://HOST:PORT [--topic T] [--replay tcp://HOST:PORT [--from N]]\n"
    "                        [--count N] [--duration SECONDS]\n"
    "       kvrouter kv-dump --hex            (reads one hex payload per line on stdin)\n"
    "\n"
    "Prints each KV-event batch an engine publishes as one JSON line: sequence, topic, source\n"
    "(live or replay), timestamp, dp rank and every event with all its fields, decoded exactly as\n"
    "the router decodes them. With --replay, first asks the engine's replay socket for batches\n"
    "from sequence --from, then follows the live stream.\n";

std::optional<std::vector<std::uint8_t>> from_hex(std::string_view hex) {
  while (!hex.empty() && (hex.back() == '\r' || hex.back() == ' ')) hex.remove_suffix(1);
  if (hex.size() % 2 != 0) return std::nullopt;
  std::vector<std::uint8_t> out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    auto digit = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<std::uint8_t>(hi * 16 + lo));
  }
  return out;
}

int dump_hex_lines() {
  kv_wire_decoder decoder;
  kv_batch batch;
  std::string line;
  int failures = 0;
  for (std::size_t n = 1; std::getline(std::cin, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    // TSV lines (as in the test vectors) carry the payload in their last column.
    const std::string_view hex = std::string_view(line).substr(line.rfind('\t') == std::string::npos ? 0 : line.rfind('\t') + 1);
    nlohmann::json out{{"line", n}};
    auto bytes = from_hex(hex);
    if (!bytes) {
      out["error"] = "not a hex string";
      ++failures;
    } else if (auto decoded = decoder.decode_batch(*bytes, batch)) {
      out.update(to_json(batch));
    } else if (auto event = decoder.decode_event(*bytes)) {
      out["event"] = to_json(*event);  // a single event, as operators sometimes paste
    } else {
      out["error"] = decoded.error().message;
      ++failures;
    }
    std::cout << out.dump() << "\n";
  }
  return failures == 0 ? 0 : 1;
}

std::uint64_t be64(const zmq::message_t& frame) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < 8 && i < frame.size(); ++i) value = (value << 8) | static_cast<const std::uint8_t*>(frame.data())[i];
  return value;
}

}  // namespace

namespace {

/// What `kv-dump` was asked for.
struct kv_dump_options {
  std::string connect, topic, replay;
  std::uint64_t from = 0, count = 0;
  double duration = 0;
  bool hex = false;
};

const option_table<kv_dump_options>& kv_dump_table() {
  using o_t = kv_dump_options;
  static const option_table<o_t> t = {
      text<o_t>("--connect", "ENDPOINT", "the engine's KV-event PUB endpoint", [](auto& o) -> auto& { return o.connect; }, true),
      text<o_t>("--topic", "T", "subscribe to this topic prefix only", [](auto& o) -> auto& { return o.topic; }),
      text<o_t>("--replay", "ENDPOINT", "the engine's replay (ROUTER) endpoint: ask for batches from --from first",
                [](auto& o) -> auto& { return o.replay; }, true),
      integer<o_t>("--from", "N", "the first sequence number to replay", [](auto& o) -> auto& { return o.from; }, 0, UINT64_MAX),
      without_default(integer<o_t>("--count", "N", "stop after N batches", [](auto& o) -> auto& { return o.count; }, 1, UINT64_MAX)),
      without_default(real<o_t>("--duration", "SECONDS", "stop after this long", [](auto& o) -> auto& { return o.duration; }, 0.001, 1e7)),
      flag_switch<o_t>("--hex", "decode hex payloads from stdin (one per line) instead of connecting",
                       [](auto& o) -> auto& { return o.hex; }),
  };
  return t;
}

}  // namespace

int run_kv_dump(const std::vector<std::string>& args) {
  kv_dump_options parsed;
  if (auto ok = parse_options<kv_dump_options>(kv_dump_table(), args, parsed); !ok) {
    if (ok.error().empty()) {
      std::cout << kv_dump_usage << "\nOptions:\n" << options_help<kv_dump_options>(kv_dump_table());
      return 0;
    }
    std::cerr << "kvrouter kv-dump: " << ok.error() << "\n";
    return 2;
  }
  const auto& [connect, topic, replay, from, count, duration, hex] = parsed;
  if (hex) return dump_hex_lines();
  if (connect.empty()) {
    std::cerr << "kvrouter kv-dump: --connect or --hex is required\n" << kv_dump_usage;
    return 2;
  }

  zmq::context_t context;
  zmq::socket_t sub(context, zmq::socket_type::sub);
  sub.set(zmq::sockopt::linger, 0);
  sub.set(zmq::sockopt::subscribe, topic);
  kv_wire_decoder decoder;
  kv_batch batch;
  std::uint64_t printed = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(duration > 0 ? duration : 1e9);
  auto print = [&](std::uint64_t seq, std::string_view batch_topic, const char* source, const zmq::message_t& payload) {
    nlohmann::json out{{"seq", seq}, {"topic", batch_topic}, {"source", source}};
    auto decoded = decoder.decode_batch({static_cast<const std::uint8_t*>(payload.data()), payload.size()}, batch);
    if (decoded) out.update(to_json(batch));
    else out["error"] = decoded.error().message;
    std::cout << out.dump() << std::endl;
    ++printed;
  };
  // ZeroMQ connects in the background and never says an endpoint is dead: a monitor tells
  // whether the connection was ever made, so a dump of nothing can say why and fail.
  bool connected = false, replay_failed = false;
  zmq::socket_t monitor(context, zmq::socket_type::pair);
  auto saw_connection = [&] {
    zmq::message_t event;
    while (!connected && monitor.recv(event, zmq::recv_flags::dontwait)) {
      if (event.more()) (void)monitor.recv(event, zmq::recv_flags::dontwait);  // the address frame
      connected = true;
    }
    return connected;
  };
  try {
    if (zmq_socket_monitor(sub.handle(), "inproc://kv-dump-monitor", ZMQ_EVENT_CONNECTED) != 0) throw zmq::error_t();
    monitor.connect("inproc://kv-dump-monitor");
    sub.connect(connect);
    if (!replay.empty()) {
      zmq::socket_t dealer(context, zmq::socket_type::dealer);
      dealer.set(zmq::sockopt::linger, 0);
      dealer.set(zmq::sockopt::rcvtimeo, 5000);
      dealer.connect(replay);
      zmq::message_t start(8);
      for (int i = 7, shift = 0; i >= 0; --i, shift += 8) static_cast<std::uint8_t*>(start.data())[i] = static_cast<std::uint8_t>(from >> shift);
      std::array<zmq::message_t, 2> request{zmq::message_t(), std::move(start)};
      zmq::send_multipart(dealer, request);
      std::vector<zmq::message_t> frames;
      for (;;) {
        frames.clear();
        if (!zmq::recv_multipart(dealer, std::back_inserter(frames))) {
          std::cerr << "kvrouter kv-dump: no answer from the replay endpoint " << replay << " within 5 s\n";
          replay_failed = true;
          break;
        }
        if (frames.size() < 3) continue;
        const std::uint64_t seq = be64(frames[frames.size() - 2]);
        if (seq == ~std::uint64_t{0}) break;  // end of replay
        print(seq, frames.size() == 4 ? frames[1].to_string_view() : std::string_view{}, "replay", frames.back());
        if (count > 0 && printed >= count) return 0;
      }
    }
    sub.set(zmq::sockopt::rcvtimeo, 100);
    std::vector<zmq::message_t> frames;
    while (std::chrono::steady_clock::now() < deadline && (count == 0 || printed < count)) {
      frames.clear();
      saw_connection();
      if (!zmq::recv_multipart(sub, std::back_inserter(frames))) continue;
      if (frames.size() != 3) continue;
      connected = true;
      print(be64(frames[1]), frames[0].to_string_view(), "live", frames[2]);
    }
  } catch (const zmq::error_t& e) {
    std::cerr << "kvrouter kv-dump: " << e.what() << "\n";
    return 1;
  }
  if (!saw_connection()) {
    std::cerr << "kvrouter kv-dump: never connected to " << connect << " (is the engine publishing there?)\n";
    return 1;
  }
  return replay_failed ? 1 : 0;
}

}  // namespace kvr::cli
