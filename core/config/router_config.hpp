#pragma once
/// Router configuration: modes, knobs with their defaults, the `load-aware` preset, validation,
/// effective-config resolution and the two gate predicates (docs/architecture.md §2).
///
/// The knob names are the JSON keys of the config file and, with `_` written as `-`, the
/// command-line flags of `kvrouter` (`overlap_score_credit` <-> `--overlap-score-credit`).

#include <cstdint>
#include <expected>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace kvr {

enum class router_mode : std::uint8_t { kv, round_robin, random, power_of_two, least_loaded };

/// The spelling used in config files and flags: `kv`, `round-robin`, `random`, `power-of-two`,
/// `least-loaded`.
[[nodiscard]] std::string_view to_string(router_mode mode);
[[nodiscard]] std::optional<router_mode> parse_router_mode(std::string_view text);

/// What a cached block is worth by the tier it is on, against a GPU hit (1): a block an engine
/// loads from host memory, disk or an external store still saves most of its prefill.
/// Spelled `gpu=1.0,host=0.75,disk=0.25,external=0.5` (Dynamo's and llm-d's figures).
struct kv_tier_weights {
  double gpu = 1.0;
  double host = 0.75;
  double disk = 0.25;
  double external = 0.5;
  friend bool operator==(const kv_tier_weights&, const kv_tier_weights&) = default;
};

/// `gpu=1.0,host=0.75,...`: any of the four names, each a finite number in [0, 1]; names not
/// given keep `base`'s weight.
[[nodiscard]] std::expected<kv_tier_weights, std::string> parse_tier_weights(std::string_view text, kv_tier_weights base = {});
[[nodiscard]] std::string to_string(const kv_tier_weights& weights);

struct router_config {
  router_mode mode = router_mode::kv;
  /// Weight of one cached block against one block of prefill work (0 = ignore the cache).
  double overlap_score_credit = 1.0;
  /// Weight of prefill work against decode work in the cost.
  double prefill_load_scale = 1.0;
  /// Weight of each cached block a placement would evict (the prompt's new blocks beyond the
  /// worker's free cache capacity) against a block of prefill work: an evicted block is a hit
  /// some later request loses (core/routing/cache_capacity).
  double eviction_weight = 8.0;
  /// 0 = pick the cheapest worker; > 0 = sample from softmax(-normalized cost / temperature).
  double router_temperature = 0.0;
  /// Build the prefix index from the workers' KV events (false = approximate mode: predict the
  /// index from the router's own decisions).
  bool use_kv_events = true;
  /// Count each in-flight request's KV blocks as decode load.
  bool track_active_blocks = true;
  /// How long an approximate-mode (predicted) index entry lives.
  std::uint32_t approx_ttl_secs = 120;
  /// Hard bound on (worker, block) entries in one worker set's prefix index.
  std::uint64_t max_index_blocks = std::uint64_t{1} << 20;
  /// Tokens per KV block. A property of the engines, so it always comes from the worker set's
  /// card (or `--block-size` for a command-line set), never from a card's `router_config`.
  std::uint32_t block_size = 16;

  // Admission (core/routing/admission_queue): a worker is busy when its booked prefill tokens
  // exceed busy_threshold x max_num_batched_tokens, or its engine reports waiting requests.
  // Requests that find every routable worker busy wait in the set's queue.
  /// 0 turns the queue off: every request is forwarded at once.
  double busy_threshold = 0.0;
  /// kv mode: whether a worker whose engine's last scrape reports waiting requests is busy (the
  /// hard filter: passed over while another worker is free). Off, the queue is priced instead
  /// (`engine_queue_weight`), which measured 3-4x lower mean TTFT near capacity
  /// (docs/benchmarks.md). The load-only modes, with no cost to price it in, always obey it.
  bool engine_waiting_busy = false;
  /// kv mode: each request an engine reports waiting beyond this router's own requests not yet
  /// started there (traffic that bypasses it, another router's) adds this many times the
  /// routed prompt's blocks to the worker's prefill load. 0 ignores engines' queues in the cost.
  double engine_queue_weight = 1.0;
  /// The engines' prefill batch size in tokens (vLLM's `--max-num-batched-tokens`).
  std::uint32_t max_num_batched_tokens = 8192;
  /// Requests a set's queue holds; beyond, 429 `queue_full`.
  std::uint32_t queue_size = 1024;
  /// Longest wait in the queue; beyond, 503 `queue_timeout`.
  std::uint32_t queue_timeout_secs = 60;
  /// A request waiting this long moves up one priority class (and again after as long).
  std::uint32_t queue_age_boost_secs = 10;

  // Session affinity (core/routing/session_affinity): a conversation's turns (same session
  // header or `user`) go to the worker that served it while its binding lives.
  /// How long a binding lives after its last turn; 0 = no affinity.
  std::uint32_t session_affinity_ttl_secs = 0;
  /// The bound worker is left when its cost exceeds the best one's by more than this many
  /// blocks (kv and load-only modes; round-robin and random keep it while it is routable).
  double session_affinity_slack = 16.0;

  // Migration (docs/migration.md): an answer whose worker fails mid-way is continued on another
  // worker from the tokens generated so far.
  /// Continuations per request; 0 = a failure mid-stream ends the stream with an error event.
  std::uint32_t migration_limit = 3;
  /// The longest continuation prompt (the prompt's tokens plus those generated); 0 = no bound
  /// but the engine's own.
  std::uint32_t migration_max_seq_len = 0;
  /// Non-streamed chats and completions are asked for as streams and gathered for the client,
  /// so that they can be continued too. Off by default: the gathered answer has vLLM's fields
  /// for it, not every field an engine's own non-streamed answer has (docs/migration.md).
  bool migration_whole_answers = false;

  // Lower KV tiers (core/routing/kv_tiers): blocks engines publish on host memory, disk or an
  // external store (vLLM's OffloadingConnector, SGLang's HiCache, LMCache).
  /// What a hit on each tier is worth against a GPU hit, in the cost.
  kv_tier_weights tier_weights;
  /// A worker's blocks on a tier that has never sent a removal (LMCache sends none) are
  /// forgotten this long after they were stored; 0 = kept until the bound pushes them out.
  std::uint32_t lower_tier_ttl_secs = 600;
  /// Bound on (worker, block) pairs per lower tier of a set; the oldest go first.
  std::uint64_t max_lower_tier_blocks = 1u << 20;

  friend bool operator==(const router_config&, const router_config&) = default;
};

/// `--load-aware`: kv mode with no overlap credit and no KV events (pure load balancing on the
/// kv cost function).
[[nodiscard]] router_config load_aware_preset(router_config base = {});

/// kv mode with a positive overlap credit: the router scores prefix overlap, so the prefix index,
/// the hasher and multimodal routing pay off.
[[nodiscard]] bool uses_prefix_overlap(const router_config& config);
/// Whether a running set can take `next` in place of `running` without being rebuilt: they differ
/// only in the cost function's weights (`router_temperature`, `prefill_load_scale`,
/// `overlap_score_credit`), the admission, session and migration knobs, and agree on whether prefix overlap is
/// scored, so the pipeline, the prefix index, the bookings and the queue all stay as they are.
[[nodiscard]] bool retunable_in_place(const router_config& running, const router_config& next);
/// Prefix overlap scored from the workers' own KV events (as opposed to approximate mode).
[[nodiscard]] bool should_subscribe_to_kv_events(const router_config& config);

/// Round-robin and random pick without looking at loads or the prefix index, so ingress takes
/// these decisions on its I/O threads and only reports the bookings to the scorer (unless the
/// set queues when busy, or keeps session affinity: the queue needs the bookings, the
/// sessions' bindings live in the scorer).
[[nodiscard]] bool decides_without_state(const router_config& config);
/// The set holds requests while every worker is busy (`busy_threshold` > 0).
[[nodiscard]] bool queues_when_busy(const router_config& config);

/// A config rejected by validation or parsing; `message` names the knob and the bad value.
struct config_error {
  std::string message;
};

/// Checks every knob's range; the first violation is reported.
[[nodiscard]] std::expected<void, config_error> validate(const router_config& config);

/// Resolves a worker set's effective config: the card's `router_config`, when present, replaces
/// the global one whole (no field merge); the block size is always the card's.
[[nodiscard]] router_config resolve_effective_config(const router_config& global,
                                                     const std::optional<router_config>& card_override,
                                                     std::uint32_t card_block_size);

/// One knob: its name (JSON key; flag = `--` + name with `-` for `_`), and what it does.
struct knob_info {
  std::string_view name;
  std::string_view value_hint;  ///< e.g. "NUMBER", "MODE", "true|false"
  std::string_view help;
  std::string_view range;       ///< the values validate() accepts, e.g. ">= 0"
};
[[nodiscard]] std::span<const knob_info> knobs();

/// Sets the knob `name` (JSON key spelling) from its textual value, e.g. from a flag.
[[nodiscard]] std::expected<void, config_error> set_knob(router_config& config, std::string_view name,
                                                         std::string_view value);

/// Reads a JSON object of knobs over `base`: present keys override, unknown keys are an error
/// (a misspelt knob must not silently keep its default). Does not validate ranges.
[[nodiscard]] std::expected<router_config, config_error> router_config_from_json(const nlohmann::json& object,
                                                                                 router_config base = {});
[[nodiscard]] nlohmann::json to_json(const router_config& config);

}  // namespace kvr
