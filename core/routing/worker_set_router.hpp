#pragma once
/// One worker set's routing state and its decisions: the prefix index of the set's publishers,
/// the booked load of its workers, their health (the health checker's verdicts and the passive
/// back-off after a failure), the grace period before a down worker's index entries go, and the
/// map from KV publishers to workers. The scorer actor only unpacks messages, calls this class
/// with the time and replies (snapshot -> pure strategy -> act).
///
/// Publisher vs worker: a *worker* is an HTTP endpoint requests go to; a *publisher* is one
/// KV-event stream (a data-parallel worker publishes one per rank). The index is kept per
/// publisher; loads, health and picks are per worker.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/common/time.hpp"
#include "core/config/disaggregation.hpp"
#include "core/config/router_config.hpp"
#include "core/config/worker_spec.hpp"
#include "core/kv/kv_apply.hpp"
#include "core/kv/kv_event.hpp"
#include "core/metrics/engine_metrics.hpp"
#include "core/replica/peer_messages.hpp"
#include "core/replica/remote_bookings.hpp"
#include "core/routing/active_sequences.hpp"
#include "core/routing/admission_queue.hpp"
#include "core/routing/cache_capacity.hpp"
#include "core/routing/lifecycle.hpp"
#include "core/routing/kv_groups.hpp"
#include "core/routing/kv_tiers.hpp"
#include "core/routing/prefix_index.hpp"
#include "core/routing/selector/selector.hpp"
#include "core/routing/session_affinity.hpp"

namespace kvr {

struct worker_set_router_settings {
  router_config config;                   ///< the set's effective config
  std::vector<std::string> worker_names;  ///< routable workers, indexed by worker id
  /// KV publishers (index ids) -> their worker; empty = one publisher per worker (identity),
  /// as in approximate mode.
  std::vector<std::uint32_t> publisher_worker;
  std::vector<std::string> publisher_names;  ///< for dumps; empty = the worker names
  duration unhealthy_backoff = std::chrono::milliseconds(5000);
  duration max_request_age = std::chrono::seconds(3600);  ///< bookings older than this are presumed lost
  /// A worker the health checker reports down keeps its index entries this long (a short
  /// outage loses nothing), then they are dropped.
  duration index_grace = std::chrono::seconds(60);
  std::uint64_t seed = 0x5eed;  ///< the selector's random tie-breaks
  /// An engine's scraped metrics count this long (about three scrape intervals): a worker whose
  /// scrapes stopped is judged on its bookings alone.
  duration engine_metrics_ttl = std::chrono::seconds(3);
  /// Router replicas share this set's bookings (docs/replicas.md): every booking step goes
  /// into the outbox for the peers, and the peers' bookings count as load here.
  bool share_bookings = false;
  duration peer_timeout = std::chrono::seconds(3);  ///< a peer silent this long is dropped
  /// Prefill/decode disaggregation (docs/disaggregation.md): the pools are the workers' roles
  /// (indexed by worker id; empty = every worker does both).
  std::optional<disaggregation_card> disaggregation;
  std::vector<worker_role> worker_roles;
};

/// What the set's routing state looks like at one moment (for /metrics, /ready, /v1/router/sets).
struct worker_set_status {
  struct worker {
    std::string name;
    bool healthy = true;
    std::uint64_t prefill_tokens = 0;
    std::uint64_t decode_blocks = 0;
    std::uint32_t requests = 0;
    /// What other replicas booked on it (the three above are this replica's own).
    worker_load remote;
    std::uint64_t index_blocks = 0;
    std::uint64_t routed = 0;
    std::uint64_t failures = 0;
    std::uint64_t engine_restarts = 0;  ///< seen in its scrapes
    bool busy = false;                 ///< see worker_set_router::busy
    engine_metrics engine;             ///< the last scrape (empty when none, or too old)
    std::optional<duration> last_kv_batch_age;  ///< since its publishers' latest batch; none yet
  };
  std::vector<worker> workers;
  std::uint64_t routed = 0;
  /// Blocks of the prompts routed with prefix overlap scored, and of them the blocks the chosen
  /// worker cached (their ratio is the set's hit rate; 0 where overlap is not scored).
  std::uint64_t prompt_blocks_routed = 0;
  std::uint64_t overlap_blocks_routed = 0;
  std::uint64_t session_bindings = 0;  ///< live session-affinity bindings
  std::uint64_t session_moves = 0;     ///< bound conversations that moved to another worker
  std::uint64_t dry_runs = 0;
  std::uint64_t unroutable = 0;
  std::uint64_t expired_bookings = 0;
  std::uint64_t index_blocks = 0;
  std::uint64_t kv_batches = 0;
  admission_status admission;  ///< the scorer's queue (filled by the scorer, not the router)
  bool shares_bookings = false;
  std::vector<peer_view> peers;  ///< other replicas heard from (sharing sets only)
  remote_bookings_counters peer_counters;
};

class worker_set_router {
 public:
  explicit worker_set_router(worker_set_router_settings settings);

  /// Chooses a worker for `query` and, unless it is a dry run, books the request on it (and,
  /// in approximate mode, predicts that the worker now caches the prompt).
  ///
  /// A disaggregated set chooses a pair for a query that asks for one: the prefill worker by
  /// the set's cost function over the prefill pool (where the prompt's cached prefix counts),
  /// the decode worker by booked load over the decode pool (`decode_overlap_credit` credits
  /// its own cached prefix). The prefill leg is booked with its prefill work under
  /// `prefill_leg_id`, the decode leg as prefilled (only its blocks count). Queueing applies to
  /// the prefill pool; other requests of the set run aggregated on the decode pool.
  [[nodiscard]] route_decision decide(const route_query& query, time_point now);
  /// Applies one step of a request's life (bookings by ingress, first tokens, ends, failures).
  void on_lifecycle(const lifecycle_event& event, time_point now);
  /// Takes new cost-function weights (`retunable_in_place(current, config)` must hold): the
  /// index, bookings and health stay.
  void retune(const router_config& config);
  /// The health checker's verdict on `worker`.
  void on_health(std::uint32_t worker, bool up, time_point now);
  /// A batch of KV events from `publisher`, after clearing its entries if `clear_first`, that
  /// arrived at `now`. Batches of publishers this set does not know are ignored.
  void on_kv_batch(std::uint32_t publisher, bool clear_first, const kv_batch& batch, time_point now);
  /// A scrape of `worker`'s `/metrics`. True when it shows the engine restarted since the last
  /// one (its start time moved on): its index entries are dropped at once, since its cache is
  /// empty and its next KV batch may be long in coming.
  bool on_engine_metrics(std::uint32_t worker, const engine_metrics& metrics, time_point now);
  /// Another replica's booking steps on this set. In approximate mode its routings also teach
  /// the predicted index (every replica learns every replica's placements).
  void on_peer_message(const peer_bookings_message& message, time_point now);
  /// A part of another replica's snapshot of its bookings.
  void on_peer_message(const peer_snapshot_message& message, time_point now);
  /// Drops the peers silent past the peer timeout (tick() does too; the scorer checks more
  /// often so that a dead replica's load goes soon after its timeout). True when one went.
  bool expire_peers(time_point now) { return remote_ && remote_->expire(now) > 0; }
  /// The booking steps taken since the last call, for the peers (empty unless sharing).
  [[nodiscard]] std::vector<peer_event> take_outbox() { return std::exchange(outbox_, {}); }
  [[nodiscard]] std::size_t outbox_size() const { return outbox_.size(); }
  /// This replica's own bookings in flight, as a snapshot lists them.
  [[nodiscard]] std::vector<peer_snapshot_entry> own_bookings() const;
  /// A publisher left: its index entries go.
  void remove_publisher(std::uint32_t publisher);
  /// Housekeeping: expires lost bookings and predicted entries, drops the index entries of
  /// workers down for longer than the grace period.
  void tick(time_point now);

  [[nodiscard]] bool healthy(std::uint32_t worker, time_point now) const;
  /// Busy: its booked prefill tokens exceed `busy_threshold` x its prefill batch size (the
  /// engine's own when its metrics tell it, else `max_num_batched_tokens`), or its engine
  /// reports waiting requests, in the load-only modes and in kv mode with `engine_waiting_busy`
  /// (otherwise kv's cost prices those this router did not send: `engine_queue_weight`).
  /// Busy workers get no new request while another worker is free; when none is, requests
  /// wait in the set's queue (busy_threshold > 0) or go to the cheapest as before.
  [[nodiscard]] bool busy(std::uint32_t worker, time_point now) const;
  [[nodiscard]] std::size_t workers() const { return settings_.worker_names.size(); }
  [[nodiscard]] worker_set_status status(time_point now) const;
  /// The index, per publisher, with its event counters (operators and tests).
  [[nodiscard]] nlohmann::json dump_index() const;
  [[nodiscard]] const prefix_index& index() const { return *index_; }
  [[nodiscard]] const active_sequences& loads() const { return *active_; }

 private:
  /// Drops what the index and the groups hold of `publisher`.
  void forget_publisher(std::uint32_t publisher);
  struct worker_state {
    time_point unhealthy_until{};            ///< passive back-off after a failure
    std::optional<time_point> down_since;    ///< the health checker's "down"
    bool index_dropped = false;              ///< entries dropped after the grace period
    std::uint64_t routed = 0;
    std::uint64_t failures = 0;
    engine_metrics engine;
    time_point engine_until{};  ///< `engine` counts until then
    double engine_unexplained_waiting = 0;  ///< waiting beyond the unstarted bookings, at the scrape
    std::optional<double> engine_start;  ///< the engine's start time as last scraped
    std::uint64_t engine_restarts = 0;
  };

  /// The one booking path: a decision's or one ingress made itself.
  void book(const booking& request, time_point now, std::span<const std::uint64_t> sequence_hashes);
  void worker_failed(std::uint64_t request_id, std::uint32_t worker, time_point now);
  /// Per worker: the prompt's overlap (index and in-flight blocks) into `worker_overlaps_`.
  void compute_overlaps(std::span<const std::uint64_t> sequence_hashes);
  /// Which workers a pick may choose from.
  enum class pool : std::uint8_t { any, prefill, decode };
  /// `healthy_` = the pool's workers that are healthy now.
  void mark_routable(pool from, time_point now);
  /// Takes busy workers out of `healthy_` while another routable worker is free; true when
  /// none is free and the set queues (the request must wait).
  bool keep_free_workers_only(const route_query& query, time_point now);
  /// The selector's pick among `healthy_` under `config`, the loads being `loads`.
  [[nodiscard]] std::optional<selection> pick(const route_query& query, const router_config& config,
                                              std::span<const worker_load> loads, time_point now);
  /// Requests `worker`'s engine last reported waiting beyond the bookings (this router's and
  /// its peers') whose first token had not come when the scrape arrived: 0 without a fresh one.
  [[nodiscard]] double unexplained_engine_queue(std::uint32_t worker, time_point now) const;
  /// Per worker: the blocks the index has it hold, and its events' removals (sums over its publishers).
  [[nodiscard]] std::uint64_t resident_blocks(std::uint32_t worker) const;
  [[nodiscard]] std::uint64_t removed_events(std::uint32_t worker) const;
  /// Of a prompt of `prompt_blocks` full blocks, `overlap` of them cached on `worker`: how many
  /// cached blocks its new ones would evict there.
  [[nodiscard]] std::uint64_t evicted_blocks(std::uint32_t worker, std::uint32_t overlap, std::uint64_t prompt_blocks) const;
  /// `prompt_blocks`: the prompt's hashed (full) blocks, those an engine would cache.
  void fill_dry_run(route_decision& decision, time_point now, std::uint64_t prompt_blocks);
  /// Books the chosen worker(s) and records what routing learned from the decision.
  void commit(const route_query& query, route_decision& decision, time_point now);
  void keep_session_worker(const route_query& query, time_point now, selection& chosen);
  /// This replica's bookings plus its peers' on `worker`.
  [[nodiscard]] worker_load booked_load(std::uint32_t worker) const;
  void share(peer_event event);
  /// Sequence hashes travel with bookings where a peer uses them: shared in-flight blocks, or
  /// the predicted index of approximate mode.
  [[nodiscard]] bool peers_need_hashes() const;

  worker_set_router_settings settings_;
  std::unique_ptr<prefix_index> index_;
  std::unique_ptr<kv_groups> groups_;  ///< a hybrid model's groups other than full attention
  std::unique_ptr<kv_tiers> tiers_;    ///< blocks on host memory, disk or an external store
  std::vector<double> worker_tier_credit_;  ///< per worker, this prompt's lower-tier credit
  std::unique_ptr<active_sequences> active_;
  std::optional<remote_bookings> remote_;  ///< sharing sets only
  std::vector<peer_event> outbox_;
  selector_rng rng_;
  std::uint64_t round_robin_ticket_ = 0;
  std::vector<worker_state> workers_;
  std::vector<kv_event_counters> events_;  ///< per publisher
  std::vector<std::optional<time_point>> last_batch_;  ///< per publisher
  std::uint64_t prompt_blocks_routed_ = 0, overlap_blocks_routed_ = 0;
  session_bindings sessions_;
  std::uint64_t routed_total_ = 0, dry_runs_ = 0, unroutable_ = 0, clears_ = 0;
  // Reused per request.
  std::vector<std::uint32_t> publisher_overlaps_, worker_overlaps_, active_overlaps_;
  std::vector<std::uint8_t> healthy_, busy_;
  std::vector<worker_load> total_loads_;  ///< local plus remote, when peers are heard
  router_config decode_config_;  ///< the set's config with the decode pool's overlap credit
  std::vector<worker_candidate> candidates_;
  cache_capacity capacity_;  ///< per worker: how many blocks its cache holds
  /// Per worker, its publishers (a data-parallel worker's ranks).
  std::vector<std::vector<std::uint32_t>> publishers_of_;
};

}  // namespace kvr
