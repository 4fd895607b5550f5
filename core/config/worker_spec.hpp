#pragma once
/// The command-line description of one worker:
///
///     URL[,kv_events=ENDPOINT][,replay=ENDPOINT][,dp_size=N][,id=NAME][,topic=TOPIC]
///        [,role=prefill|decode|both][,bootstrap=PORT]
///
/// The URL is `http://` or `https://` (verified against the system's CAs and
/// `--worker-ca-file`), e.g. `http://10.0.0.5:8000,kv_events=tcp://10.0.0.5:5557,replay=tcp://10.0.0.5:5600,dp_size=2`.
/// `role` places the worker in a disaggregated set's prefill or decode pool (docs/disaggregation.md);
/// `bootstrap` is an SGLang prefill worker's bootstrap port.
/// With `dp_size=N`, rank r publishes on the KV and replay ports + r (docs/kv-events.md).
/// The keys are the config file's worker keys, one spelling for one thing; the older `kv=` and
/// `dp=` are still read, and reported so the caller can warn.

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config/router_config.hpp"

namespace kvr {

/// What a worker does in a disaggregated set: prefill prompts, decode them, or both (the
/// default; in an aggregated set every worker does both).
enum class worker_role : std::uint8_t { both, prefill, decode };

[[nodiscard]] std::string_view to_string(worker_role role);
[[nodiscard]] std::optional<worker_role> parse_worker_role(std::string_view text);
[[nodiscard]] inline bool prefills(worker_role role) { return role != worker_role::decode; }
[[nodiscard]] inline bool decodes(worker_role role) { return role != worker_role::prefill; }

/// SGLang's default bootstrap port of a prefill server (`--disaggregation-bootstrap-port`).
inline constexpr std::uint16_t default_bootstrap_port = 8998;

struct worker_spec {
  std::string id;               ///< empty = the caller names it (w0, w1, ...)
  std::string url;              ///< the worker's OpenAI HTTP base URL
  std::string kv_events;        ///< ZMQ endpoint of its KV-event publisher; empty = none
  std::string replay;           ///< ZMQ endpoint of its replay socket; empty = none
  std::string topic;            ///< KV-event topic prefix (default: all topics)
  std::uint32_t dp_size = 1;    ///< data-parallel ranks
  worker_role role = worker_role::both;
  std::uint16_t bootstrap_port = default_bootstrap_port;  ///< SGLang prefill workers only

  friend bool operator==(const worker_spec&, const worker_spec&) = default;
};

/// The name a worker goes by: its `id=`, else `w<index>`.
[[nodiscard]] std::string worker_name(const worker_spec& spec, std::size_t index);

/// One KV-event publisher of a worker: the worker itself, or one data-parallel rank of it
/// (rank r on the KV and replay ports + r, named `NAME/dpR`).
struct publisher_spec {
  std::uint32_t worker = 0;  ///< index of its worker in the list given to expand_publishers
  std::string name;
  std::string endpoint;      ///< empty when the worker has no kv= endpoint (bind mode)
  std::string replay_endpoint;
  std::string topic;
};

/// Every publisher of `workers`, in order (worker by worker, rank by rank).
[[nodiscard]] std::vector<publisher_spec> expand_publishers(const std::vector<worker_spec>& workers);

/// Rank `offset`'s endpoint: `tcp://host:5557` with the port moved by `offset` (data-parallel
/// rank r publishes on port + r); other transports (`ipc://PATH`) get `-offset` appended, as
/// kvrouter-mocker names its ranks' sockets.
[[nodiscard]] std::string endpoint_with_port_offset(const std::string& endpoint, int offset);

/// A key of the spec's older spelling that was read, and the key that replaces it.
struct deprecated_key {
  std::string old_key;
  std::string new_key;
};

/// Parses one spec; errors name the bad part. Old spellings read are appended to `deprecated`
/// when given.
[[nodiscard]] std::expected<worker_spec, config_error> parse_worker_spec(std::string_view text,
                                                                         std::vector<deprecated_key>* deprecated = nullptr);

}  // namespace kvr
