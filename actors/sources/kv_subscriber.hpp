#pragma once
/// The KV-event subscriber of one worker set: owns the set's ZeroMQ sockets, decodes every
/// batch, runs each publisher's sequence tracker (replaying gaps through a DEALER), and hands
/// ordered batches to a sink, many per call. A detached actor drives it (actors/pipeline/component).
///
/// Topologies (docs/kv-events.md): connect one SUB per publisher endpoint (engines that bind,
/// vLLM's default `tcp://*:5557`), or bind one SUB that engines connect to and tell publishers
/// apart by topic prefix. Reconnection uses libzmq's own capped exponential backoff
/// (ZMQ_RECONNECT_IVL 100 ms doubling up to ZMQ_RECONNECT_IVL_MAX 5 s).

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/pipeline/component.hpp"
#include "core/kv/kv_event.hpp"
#include "core/kv/seq_tracker.hpp"
#include "core/config/worker_spec.hpp"
#include "messages/kv_messages.hpp"

namespace kvr {

/// One KV-event publisher: an engine, or one data-parallel rank of it.
struct kv_publisher {
  worker_id index = 0;          ///< the publisher's id in its set (the prefix index's id)
  std::string name;             ///< for logs and counters, e.g. "w0" or "w0/dp1"
  std::string endpoint;         ///< connect mode: the engine's PUB endpoint; unused in bind mode
  std::string replay_endpoint;  ///< the engine's ROUTER replay endpoint; empty = none
  std::string topic;            ///< subscription prefix (connect) or source prefix (bind)
};

/// A publisher of a worker spec, as index id `index` of its set.
inline kv_publisher to_kv_publisher(const publisher_spec& spec, worker_id index) {
  return {.index = index, .name = spec.name, .endpoint = spec.endpoint, .replay_endpoint = spec.replay_endpoint,
          .topic = spec.topic};
}

/// How many threads decode a set's KV events: `requested` (--kv-decoders) when not 0, never
/// more than there are publishers, and one where one bound socket receives them all. Auto (0):
/// one per 32 publishers, at most a quarter of the cores: a thread decodes millions of block
/// events a second, more than a few hundred engines publish, and the set's scorer applies
/// them all on one thread.
[[nodiscard]] std::size_t kv_decoder_threads(std::size_t requested, std::size_t publishers, bool bind_mode);

/// `publishers` shared out over `threads` subscribers, round-robin: a worker's data-parallel
/// ranks, adjacent in the list, land on different threads. Each publisher is on one thread, so
/// its batches keep their order.
[[nodiscard]] std::vector<std::vector<kv_publisher>> share_out_publishers(const std::vector<kv_publisher>& publishers,
                                                                          std::size_t threads);

struct kv_subscriber_settings {
  std::vector<kv_publisher> publishers;
  std::string bind_endpoint;  ///< non-empty: bind one SUB here instead of connecting
  std::chrono::milliseconds replay_timeout{5000};
  /// A replay that delivered batches and then went quiet this long is over: engines answer
  /// from a ROUTER socket, which drops what exceeds its send high-water mark (1000 messages by
  /// default), end marker included, so a large replay buffer arrives cut short. The batches
  /// that came count; the next replay asks from where they stopped.
  std::chrono::milliseconds replay_quiet{500};
  std::size_t max_batches_per_delivery = 256;
  /// Set once every publisher's warm-start replay has ended (answered, cut short or timed
  /// out) and its batches went to the scorer; publishers without a replay endpoint count as
  /// done. A new replica's /ready waits for it (docs/replicas.md). May be null.
  std::shared_ptr<std::atomic<bool>> warm_replays_done;
};

/// Per-publisher counters, readable from any thread.
struct kv_publisher_stats {
  std::string name;
  std::uint64_t live_batches = 0;
  std::uint64_t replay_batches = 0;
  std::uint64_t decode_errors = 0;  ///< payloads or frames that could not be decoded (dropped)
  std::uint64_t replays_cut_short = 0;  ///< replays that went quiet without their end marker
  seq_counters sequence;
};

class kv_subscriber final : public pollable_component {
 public:
  using sink = std::function<void(kv_updates)>;

  /// Opens the sockets. Throws std::runtime_error with the endpoint named if a socket cannot be
  /// bound or connected (bad config is fatal at start-up).
  kv_subscriber(kv_subscriber_settings settings, sink deliver);
  ~kv_subscriber() override;
  kv_subscriber(const kv_subscriber&) = delete;
  kv_subscriber& operator=(const kv_subscriber&) = delete;

  /// One step: waits up to `budget` for frames, applies what came (replays included), checks
  /// replay deadlines and delivers what is ordered.
  void poll_for(std::chrono::milliseconds budget) override;

  [[nodiscard]] std::vector<kv_publisher_stats> stats() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kvr
