#include "app/mocker/event_publisher.hpp"

#include <array>
#include <stdexcept>

#include <zmq.hpp>
#include <zmq_addon.hpp>

namespace kvr::mocker {

namespace {

std::array<std::uint8_t, 8> big_endian(std::uint64_t v) {
  std::array<std::uint8_t, 8> out{};
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v >> (56 - 8 * i));
  return out;
}

/// vLLM binds when the endpoint has a wildcard (or is ipc / inproc), and connects otherwise.
void attach(zmq::socket_t& socket, const std::string& endpoint) {
  const bool bind = endpoint.find('*') != std::string::npos || endpoint.find("::") != std::string::npos ||
                    endpoint.starts_with("ipc://") || endpoint.starts_with("inproc://");
  if (bind) socket.bind(endpoint);
  else socket.connect(endpoint);
}

struct buffered_batch {
  std::uint64_t seq;
  std::vector<std::uint8_t> payload;
};

}  // namespace

event_publisher::event_publisher(publisher_settings settings)
    : settings_(std::move(settings)), drop_pct_(settings_.drop_pct), drop_state_(settings_.seed) {
  thread_ = std::thread([this] { run(); });
  std::unique_lock lock(startup_mutex_);
  started_.wait(lock, [this] { return startup_done_; });
  if (!startup_error_.empty()) {
    thread_.join();
    throw std::runtime_error(startup_error_);
  }
}

event_publisher::~event_publisher() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void event_publisher::publish(std::vector<kv_event> events, double timestamp) {
  if (events.empty()) return;
  std::lock_guard lock(mutex_);
  // splitmix64 -> a uniform draw in [0, 100)
  std::uint64_t z = (drop_state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  const double draw = static_cast<double>((z ^ (z >> 31)) >> 11) * (100.0 / 9007199254740992.0);
  const double drop_pct = drop_pct_;
  queue_.emplace_back(kv_batch{.timestamp = timestamp, .dp_rank = settings_.dp_rank, .events = std::move(events)},
                      drop_pct > 0 && draw < drop_pct);
}

void event_publisher::restart() {
  std::lock_guard lock(mutex_);
  queue_.clear();
  restart_requested_ = true;
}

void event_publisher::run() {
  zmq::context_t context(1);
  zmq::socket_t pub(context, zmq::socket_type::pub);
  zmq::socket_t replay(context, zmq::socket_type::router);
  const bool has_replay = !settings_.replay_endpoint.empty();
  try {
    pub.set(zmq::sockopt::sndhwm, 100000);
    pub.set(zmq::sockopt::linger, 0);
    attach(pub, settings_.endpoint);
    replay.set(zmq::sockopt::linger, 0);
    if (has_replay) attach(replay, settings_.replay_endpoint);
  } catch (const zmq::error_t& e) {
    startup_error_ = "KV events on " + settings_.endpoint + ": " + e.what();
  }
  {
    std::lock_guard lock(startup_mutex_);
    startup_done_ = true;
  }
  started_.notify_all();
  if (!startup_error_.empty()) return;

  std::deque<buffered_batch> buffer;
  std::uint64_t next_seq = 0;
  const zmq::const_buffer topic(settings_.topic.data(), settings_.topic.size());
  while (!stop_) {
    if (has_replay) {
      std::array<zmq::pollitem_t, 1> items{{{replay.handle(), 0, ZMQ_POLLIN, 0}}};
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(2));
      if (items[0].revents & ZMQ_POLLIN) {
        std::vector<zmq::message_t> frames;
        (void)zmq::recv_multipart(replay, std::back_inserter(frames));
        // [identity, "", start seq (8 bytes big-endian)] from a DEALER.
        if (frames.size() == 3 && frames[2].size() == 8) {
          std::uint64_t start = 0;
          for (std::size_t i = 0; i < 8; ++i) start = (start << 8) | static_cast<const std::uint8_t*>(frames[2].data())[i];
          const std::string identity(static_cast<const char*>(frames[0].data()), frames[0].size());
          auto reply = [&](std::uint64_t seq, const std::vector<std::uint8_t>& payload) {
            const auto seq_bytes = big_endian(seq);
            std::array<zmq::const_buffer, 5> parts{zmq::buffer(identity), zmq::const_buffer(), topic,
                                                   zmq::buffer(seq_bytes), zmq::buffer(payload)};
            (void)zmq::send_multipart(replay, parts);
          };
          for (const buffered_batch& b : buffer)
            if (b.seq >= start) reply(b.seq, b.payload);
          reply(~std::uint64_t{0}, {});  // the end marker
          ++counters_.replays;
        }
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }

    std::deque<std::pair<kv_batch, bool>> batches;
    {
      std::lock_guard lock(mutex_);
      batches.swap(queue_);
      if (restart_requested_) {
        restart_requested_ = false;
        next_seq = 0;
        buffer.clear();
      }
    }
    for (const auto& [batch, drop] : batches) {
      buffered_batch b{next_seq++, encode_kv_batch(batch, settings_.encoding)};
      ++counters_.batches;
      if (drop) {
        ++counters_.dropped;
      } else {
        const auto seq_bytes = big_endian(b.seq);
        std::array<zmq::const_buffer, 3> parts{topic, zmq::buffer(seq_bytes), zmq::buffer(b.payload)};
        (void)zmq::send_multipart(pub, parts, zmq::send_flags::dontwait);
      }
      buffer.push_back(std::move(b));
      if (buffer.size() > settings_.buffer_steps) buffer.pop_front();
    }
  }
}

}  // namespace kvr::mocker
