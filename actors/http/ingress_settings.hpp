#pragma once
/// The HTTP ingress's limits and timeouts, with their defaults (the command line's defaults are
/// these: app/cli.cpp reads and prints them).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvr {

struct ingress_settings {
  std::string host = "0.0.0.0";
  std::uint16_t port = 8080;              ///< 0 = any free port (see http_ingress::port())
  std::size_t threads = 0;                ///< I/O threads; 0 = one per core
  std::uint64_t max_body_bytes = 32u << 20;
  std::uint32_t max_header_bytes = 64u << 10;
  /// Longest a client may take to send a whole request (keep-alive idle time included) or to
  /// accept a chunk of the answer: slow clients cannot hold a connection forever.
  std::chrono::seconds client_timeout{60};
  std::chrono::seconds connect_timeout{5};
  /// Longest wait for a worker's next bytes (the first ones include its prefill).
  std::chrono::seconds upstream_timeout{600};
  /// A disaggregated request's prefill leg gets this long for its whole answer; then 504.
  std::chrono::seconds pd_timeout{300};
  /// On SIGTERM, keep accepting connections this long (a load balancer's deregistration
  /// delay), then close the listeners (actors/http/http_ingress: drain).
  std::chrono::seconds drain_delay{0};
  /// On SIGTERM, longest the requests in flight may take to finish before the process exits.
  std::chrono::seconds shutdown_grace{30};
  /// `--no-decision-headers`: answers do not say where they were routed (`x-kvrouter-worker`,
  /// `x-kvrouter-overlap-blocks`); the request id is always there.
  bool no_decision_headers = false;
  /// `--session-header NAME`: the request header naming a conversation for session affinity
  /// (router config `session_affinity_ttl_secs`); without it, the body's `user` does.
  std::string session_header = "x-session-id";
  /// `--access-log PATH|-`: one JSON line per routed request ("" = none, "-" = stdout).
  std::string access_log;
  /// `--worker-ca-file PATH`: CA certificates trusted for https:// workers besides the system's
  /// (serve copies it to pipeline_settings for the health and engine-metrics polls).
  std::string worker_ca_file;
  /// `--api-key` (repeatable) and `--api-key-file` (one per line, reloaded when it changes):
  /// with either, every route but /health, /ready and the status page's HTML needs
  /// `Authorization: Bearer KEY`. `--admin-api-key` (repeatable) guards /metrics and
  /// /v1/router/* instead (they take the API keys when no admin key is given).
  std::vector<std::string> api_keys;
  std::string api_key_file;
  std::vector<std::string> admin_api_keys;
  /// `--forward-authorization`: the client's `Authorization` goes on to the worker (by default
  /// kvrouter's clients' keys stay with kvrouter).
  bool forward_authorization = false;
  /// `POST /v1/router/faults` kills a pipeline component as a crash would (drills, tests).
  bool fault_injection = false;
  std::uint32_t max_retries = 2;               ///< re-routes after a worker fails before answering
  std::uint32_t max_images_per_request = 64;   ///< more image parts in one request get 400
  /// Longer prompts get 400: token-id prompts here, tokenized ones (images expanded) in the
  /// hashers (serve copies it to pipeline_settings).
  std::uint32_t max_prompt_tokens = 1u << 20;
  std::uint32_t max_routing_in_flight = 1024;  ///< per worker set; beyond, 503 at once
};

}  // namespace kvr
