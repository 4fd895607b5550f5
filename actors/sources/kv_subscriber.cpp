#include "actors/sources/kv_subscriber.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "actors/pipeline/runtime.hpp"
#include "actors/sources/home_thread_bin.hpp"
#include "core/kv/kv_wire.hpp"
#include "core/kv/stored_block_hashes.hpp"

namespace kvr {
namespace {

using clock_type = std::chrono::steady_clock;
constexpr std::uint64_t replay_end_marker = ~std::uint64_t{0};

std::uint64_t read_be64(const zmq::message_t& frame) {
  std::uint64_t value = 0;
  const auto* bytes = static_cast<const std::uint8_t*>(frame.data());
  for (std::size_t i = 0; i < 8; ++i) value = (value << 8) | bytes[i];
  return value;
}

zmq::message_t be64_frame(std::uint64_t value) {
  zmq::message_t frame(8);
  auto* bytes = static_cast<std::uint8_t*>(frame.data());
  for (int i = 7; i >= 0; --i, value >>= 8) bytes[i] = static_cast<std::uint8_t>(value);
  return frame;
}

std::span<const std::uint8_t> bytes_of(const zmq::message_t& frame) {
  return {static_cast<const std::uint8_t*>(frame.data()), frame.size()};
}

void set_reconnect_backoff(zmq::socket_t& socket) {
  socket.set(zmq::sockopt::reconnect_ivl, 100);
  socket.set(zmq::sockopt::reconnect_ivl_max, 5000);
  socket.set(zmq::sockopt::linger, 0);
}

}  // namespace

struct kv_subscriber::impl {
  struct publisher_state {
    kv_publisher config;
    seq_tracker<kv_batch> tracker;
    std::unique_ptr<zmq::socket_t> sub;     // connect mode only
    std::unique_ptr<zmq::socket_t> replay;  // open while a replay runs
    clock_type::time_point replay_deadline{};
    std::optional<clock_type::time_point> replay_last_batch;  ///< when this replay's latest batch came
    std::optional<clock_type::time_point> replay_due;  ///< a replay waits out its back-off until then
    bool warm_replaying = false;  ///< its warm-start replay has not ended yet
    kv_publisher_stats stats;

    explicit publisher_state(kv_publisher p)
        : config(std::move(p)), tracker(!config.replay_endpoint.empty()) { stats.name = config.name; }
  };

  kv_subscriber_settings settings;
  sink deliver;
  zmq::context_t context{1};
  std::unique_ptr<zmq::socket_t> bound_sub;  // bind mode only
  std::vector<std::unique_ptr<publisher_state>> publishers;
  kv_wire_decoder decoder;
  /// Lists the scorer applied come back here, to be freed on this thread (home_thread_bin.hpp).
  std::shared_ptr<home_thread_bin<kv_update_list>> applied_lists = std::make_shared<home_thread_bin<kv_update_list>>();
  std::shared_ptr<kv_update_list> pending = applied_lists->make();
  mutable std::mutex stats_mutex;
  std::vector<kv_publisher_stats> published_stats;  // copied from the thread after each round
  clock_type::time_point next_stats_{};
  std::size_t warm_replays_left = 0;
  std::vector<zmq::pollitem_t> items;                      // reused per step
  std::vector<std::pair<publisher_state*, bool>> owners;  // (publisher or null for bound sub, is replay)

  impl(kv_subscriber_settings s, sink d) : settings(std::move(s)), deliver(std::move(d)) {
    for (const kv_publisher& p : settings.publishers) publishers.push_back(std::make_unique<publisher_state>(p));
    if (!settings.bind_endpoint.empty()) {
      bound_sub = std::make_unique<zmq::socket_t>(context, zmq::socket_type::sub);
      set_reconnect_backoff(*bound_sub);
      bound_sub->set(zmq::sockopt::rcvhwm, 100000);
      for (const auto& p : publishers) bound_sub->set(zmq::sockopt::subscribe, p->config.topic);
      try {
        bound_sub->bind(settings.bind_endpoint);
      } catch (const zmq::error_t& e) {
        throw std::runtime_error(fmt::format("cannot bind KV-event endpoint {}: {}", settings.bind_endpoint, e.what()));
      }
    } else {
      for (auto& p : publishers) {
        p->sub = std::make_unique<zmq::socket_t>(context, zmq::socket_type::sub);
        set_reconnect_backoff(*p->sub);
        p->sub->set(zmq::sockopt::rcvhwm, 100000);
        p->sub->set(zmq::sockopt::subscribe, p->config.topic);
        try {
          p->sub->connect(p->config.endpoint);
        } catch (const zmq::error_t& e) {
          throw std::runtime_error(fmt::format("cannot connect to KV-event endpoint {} of {}: {}", p->config.endpoint,
                                               p->config.name, e.what()));
        }
      }
    }
    // Warm start: ask every engine with a replay endpoint for its buffer now, so idle engines'
    // caches are known without waiting for their next batch.
    for (auto& p : publishers)
      if (p->tracker.start_warm_replay()) {
        p->warm_replaying = true;
        ++warm_replays_left;
        request_replay(*p);
      }
    report_warm_replays();
    publish_stats();
  }

  /// Once no warm-start replay is left and what they brought is delivered.
  void report_warm_replays() {
    if (warm_replays_left == 0 && settings.warm_replays_done) settings.warm_replays_done->store(true);
  }

  ~impl() {
    applied_lists->close();
    publish_stats();
  }

  void poll_for(std::chrono::milliseconds budget) {
    applied_lists->free_returned();
    items.clear();
    owners.clear();
    if (bound_sub) {
      items.push_back({static_cast<void*>(*bound_sub), 0, ZMQ_POLLIN, 0});
      owners.emplace_back(nullptr, false);
    }
    for (auto& p : publishers) {
      if (p->sub) {
        items.push_back({static_cast<void*>(*p->sub), 0, ZMQ_POLLIN, 0});
        owners.emplace_back(p.get(), false);
      }
      if (p->replay) {
        items.push_back({static_cast<void*>(*p->replay), 0, ZMQ_POLLIN, 0});
        owners.emplace_back(p.get(), true);
      }
    }
    zmq::poll(items.data(), items.size(), budget);
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (!(items[i].revents & ZMQ_POLLIN)) continue;
      auto [publisher, is_replay] = owners[i];
      if (is_replay) drain_replay(*publisher);
      else if (publisher) drain_live(*publisher->sub, publisher);
      else drain_live(*bound_sub, nullptr);
    }
    check_replay_deadlines();
    flush();
    report_warm_replays();
    if (clock_type::now() >= next_stats_) {
      publish_stats();
      next_stats_ = clock_type::now() + std::chrono::milliseconds(20);
    }
  }

  /// The publisher a bind-mode message came from: the longest configured topic prefixing it.
  publisher_state* publisher_for_topic(std::string_view topic) {
    publisher_state* best = nullptr;
    for (auto& p : publishers)
      if (topic.starts_with(p->config.topic) && (!best || p->config.topic.size() > best->config.topic.size())) best = p.get();
    return best;
  }

  void drain_live(zmq::socket_t& socket, publisher_state* fixed) {
    std::vector<zmq::message_t> frames;
    for (std::size_t n = 0; n < settings.max_batches_per_delivery; ++n) {
      frames.clear();
      if (!zmq::recv_multipart(socket, std::back_inserter(frames), zmq::recv_flags::dontwait)) return;
      publisher_state* p = fixed ? fixed : (frames.empty() ? nullptr : publisher_for_topic(frames[0].to_string_view()));
      if (p == nullptr) continue;  // bind mode: a topic no configured publisher owns
      if (frames.size() != 3 || frames[1].size() != 8) {
        ++p->stats.decode_errors;
        continue;
      }
      ++p->stats.live_batches;
      kv_batch batch = decode(*p, frames[2]);
      apply_action(*p, p->tracker.on_live(read_be64(frames[1]), batch), batch);
    }
  }

  void drain_replay(publisher_state& p) {
    std::vector<zmq::message_t> frames;
    while (p.replay) {
      frames.clear();
      if (!zmq::recv_multipart(*p.replay, std::back_inserter(frames), zmq::recv_flags::dontwait)) return;
      // ["", seq, payload] (SGLang, older vLLM) or ["", topic, seq, payload] (newer vLLM).
      if (frames.size() < 3 || frames.size() > 4 || frames[frames.size() - 2].size() != 8) {
        ++p.stats.decode_errors;
        continue;
      }
      const std::uint64_t seq = read_be64(frames[frames.size() - 2]);
      if (seq == replay_end_marker) {
        end_replay(p, true);
        return;
      }
      ++p.stats.replay_batches;
      p.replay_last_batch = clock_type::now();
      kv_batch batch = decode(p, frames.back());
      apply_action(p, p.tracker.on_replay(seq, batch), batch);
    }
  }

  /// Decodes a payload, hashes its stored blocks and frees their token ids here, off the
  /// scorer's thread.
  kv_batch decode(publisher_state& p, const zmq::message_t& payload) {
    kv_batch batch;
    if (!decoder.decode_batch(bytes_of(payload), batch)) {
      // The sequence number still counts; the batch's events are lost and counted.
      ++p.stats.decode_errors;
      batch = kv_batch{};
    }
    precompute_local_hashes(batch);
    release_hashed_token_ids(batch);
    return batch;
  }

  void apply_action(publisher_state& p, seq_action action, kv_batch& batch) {
    switch (action) {
      case seq_action::apply: pending->push_back({p.config.index, false, std::move(batch)}); break;
      case seq_action::clear_and_apply: pending->push_back({p.config.index, true, std::move(batch)}); break;
      case seq_action::request_replay: request_replay(p); break;
      case seq_action::clear_and_request_replay:
        pending->push_back({p.config.index, true, kv_batch{}});  // the restarted engine's cache starts empty
        request_replay(p);
        break;
      case seq_action::hold:
      case seq_action::skip_duplicate: break;
    }
  }

  void request_replay(publisher_state& p) {
    // A fresh DEALER per replay: replies of an abandoned replay can never be misread.
    p.replay = std::make_unique<zmq::socket_t>(context, zmq::socket_type::dealer);
    p.replay->set(zmq::sockopt::linger, 0);
    try {
      p.replay->connect(p.config.replay_endpoint);
      std::array<zmq::message_t, 2> request{zmq::message_t(), be64_frame(p.tracker.replay_from())};
      zmq::send_multipart(*p.replay, request, zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
      end_replay(p, false);
      return;
    }
    p.replay_deadline = clock_type::now() + settings.replay_timeout;
    p.replay_last_batch.reset();
  }

  void end_replay(publisher_state& p, bool completed) {
    p.replay.reset();
    if (p.warm_replaying) {
      p.warm_replaying = false;
      --warm_replays_left;
    }
    std::vector<kv_batch> held;
    const auto outcome = p.tracker.on_replay_end(completed, held);
    bool clear = outcome.clear_first;
    for (kv_batch& batch : held) {
      pending->push_back({p.config.index, clear, std::move(batch)});
      clear = false;
    }
    if (clear) pending->push_back({p.config.index, true, kv_batch{}});
    if (!outcome.replay_again) return;
    // A replay that delivered nothing new is not asked again at once: 100 ms, doubling per
    // fruitless attempt (the tracker gives up after a few and carries on live).
    const std::uint32_t attempts = p.tracker.replay_attempts();
    if (attempts == 0) return request_replay(p);
    p.replay_due = clock_type::now() + std::chrono::milliseconds(100) * (1u << std::min<std::uint32_t>(attempts - 1, 5));
  }

  void check_replay_deadlines() {
    const auto now = clock_type::now();
    for (auto& p : publishers) {
      if (p->replay && p->replay_last_batch && now - *p->replay_last_batch >= settings.replay_quiet) {
        ++p->stats.replays_cut_short;  // its end marker was dropped with the rest: carry on from here
        end_replay(*p, true);
      } else if (p->replay && now >= p->replay_deadline) {
        end_replay(*p, false);
      }
      if (p->replay_due && now >= *p->replay_due) {
        p->replay_due.reset();
        if (p->tracker.replaying() && !p->replay) request_replay(*p);
      }
    }
  }

  void flush() {
    if (pending->empty()) return;
    deliver(std::move(pending));
    pending = applied_lists->make();
  }

  void publish_stats() {
    std::lock_guard lock(stats_mutex);
    published_stats.clear();
    for (auto& p : publishers) {
      p->stats.sequence = p->tracker.counters();
      published_stats.push_back(p->stats);
    }
  }
};

std::size_t kv_decoder_threads(std::size_t requested, std::size_t publishers, bool bind_mode) {
  if (publishers == 0) return 0;
  if (bind_mode) return 1;  // one bound socket: its messages arrive in one queue
  if (requested != 0) return std::min(requested, publishers);
  const std::size_t cores = usable_cores();
  return std::clamp<std::size_t>((publishers + 31) / 32, 1, std::max<std::size_t>(1, cores / 4));
}

std::vector<std::vector<kv_publisher>> share_out_publishers(const std::vector<kv_publisher>& publishers,
                                                            std::size_t threads) {
  std::vector<std::vector<kv_publisher>> shares(std::min(threads, publishers.size()));
  for (std::size_t i = 0; i < publishers.size() && !shares.empty(); ++i) shares[i % shares.size()].push_back(publishers[i]);
  return shares;
}

kv_subscriber::kv_subscriber(kv_subscriber_settings settings, sink deliver)
    : impl_(std::make_unique<impl>(std::move(settings), std::move(deliver))) {}

kv_subscriber::~kv_subscriber() = default;

void kv_subscriber::poll_for(std::chrono::milliseconds budget) { impl_->poll_for(budget); }

std::vector<kv_publisher_stats> kv_subscriber::stats() const {
  std::lock_guard lock(impl_->stats_mutex);
  return impl_->published_stats;
}

}  // namespace kvr
