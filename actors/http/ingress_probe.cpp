#include "actors/http/ingress_probe.hpp"

#include <fmt/format.h>

namespace kvr::ingress {

void seconds_histogram::add(double seconds) {
  std::size_t bucket = 0;
  while (bucket < buckets_.size() && seconds > buckets_[bucket]) ++bucket;
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  micros_.fetch_add(static_cast<std::uint64_t>(seconds * 1e6), std::memory_order_relaxed);
}

void seconds_histogram::write(std::string& out, std::string_view name, std::string_view help) const {
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  std::uint64_t cumulative = 0;
  for (std::size_t b = 0; b < counts_.size(); ++b) {
    cumulative += counts_[b].load();
    if (b < buckets_.size()) out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, buckets_[b], cumulative);
    else out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, cumulative);
  }
  out += fmt::format("{}_sum {}\n{}_count {}\n", name, static_cast<double>(micros_.load()) / 1e6, name, cumulative);
}

void ingress_probe::write_metrics(std::string& out) const {
  auto metric = [&](std::string_view name, std::string_view help, std::string_view type,
                    const std::atomic<std::uint64_t>& value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value.load());
  };
  metric("kvrouter_connections_total", "Client connections accepted.", "counter", connections_);
  metric("kvrouter_open_connections", "Client connections open now.", "gauge", open_connections_);
  metric("kvrouter_proxied_requests_total", "Requests answered by a worker.", "counter", proxied_);
  metric("kvrouter_proxied_requests_in_flight", "Requests streaming from a worker now.", "gauge", proxied_in_flight_);
  metric("kvrouter_retries_total", "Re-routes after a worker failed before answering.", "counter", retries_);
  metric("kvrouter_stale_connection_retries_total", "Retries on a fresh connection after a pooled one was closed.",
         "counter", stale_connection_retries_);
  metric("kvrouter_upstream_failures_total", "Worker connections failing before an answer (refused, reset).", "counter",
         upstream_failures_);
  metric("kvrouter_upstream_timeouts_total", "Workers not answering within the upstream timeout.", "counter",
         upstream_timeouts_);
  metric("kvrouter_client_disconnects_total", "Clients gone before their answer was complete.", "counter",
         client_disconnects_);
  metric("kvrouter_dry_runs_total", "Routing-only requests (x-kvrouter-dry-run: 1).", "counter", dry_runs_);
  metric("kvrouter_prompts_routed_on_load_total",
         "/v1/responses and /v1/messages requests whose chat rendering is not certain (tools, function calls, images): routed on load.",
         "counter", prompts_routed_on_load_);
  metric("kvrouter_tokenize_answered_total", "/tokenize and /detokenize requests answered with the set's own tokenizer.",
         "counter", tokenized_locally_);
  metric("kvrouter_overloaded_total", "Requests refused because routing was saturated.", "counter", overloaded_);
  out += "# HELP kvrouter_pd_requests_total Requests of disaggregated sets by how they ran: disaggregated (prefill and "
         "decode legs), local (kept on the decode worker by max_local_prefill_tokens), aggregated_fallback (run whole on a "
         "decode worker: routes that are not split, n > 1, pinned requests, a prefill answer without kv_transfer_params).\n# TYPE kvrouter_pd_requests_total counter\n";
  for (auto [path, name] : {std::pair{pd_path::disaggregated, "disaggregated"}, std::pair{pd_path::local, "local"},
                            std::pair{pd_path::aggregated_fallback, "aggregated_fallback"}})
    out += fmt::format("kvrouter_pd_requests_total{{path=\"{}\"}} {}\n", name, pd_paths_[static_cast<std::size_t>(path)].load());
  metric("kvrouter_pd_missing_transfer_params_total", "Prefill answers without kv_transfer_params (vLLM).", "counter",
         pd_missing_params_);
  metric("kvrouter_pd_prefill_failures_total", "Prefill legs whose worker failed before answering.", "counter",
         pd_prefill_failures_);
  metric("kvrouter_pd_prefill_timeouts_total", "Prefill legs cut after --pd-timeout-secs (the client got a 504).", "counter",
         pd_prefill_timeouts_);
  metric("kvrouter_pd_prefill_error_statuses_total", "Prefill legs answered with an error status (passed to the client).",
         "counter", pd_prefill_error_statuses_);
  pd_prefill_seconds_.write(out, "kvrouter_pd_prefill_seconds", "Prefill legs from sending to their whole answer.");
  pd_decode_first_byte_seconds_.write(out, "kvrouter_pd_decode_first_byte_seconds",
                                      "Decode legs from sending to their first answer bytes (the decode leg's TTFT).");
  pd_decode_seconds_.write(out, "kvrouter_pd_decode_seconds", "Decode legs from sending to their whole answer.");
  out += "# HELP kvrouter_migration_refused_total Streams whose worker failed mid-way and that were not continued "
         "elsewhere, by why (the stream then ends with an error event).\n# TYPE kvrouter_migration_refused_total counter\n";
  for (std::size_t r = 0; r < migration_refusals_.size(); ++r)
    out += fmt::format("kvrouter_migration_refused_total{{reason=\"{}\"}} {}\n", to_string(static_cast<migration_refusal>(r)),
                       migration_refusals_[r].load());
  out += "# HELP kvrouter_responses_total Responses by status class.\n# TYPE kvrouter_responses_total counter\n";
  for (std::size_t c = 1; c < responses_by_class_.size(); ++c)
    out += fmt::format("kvrouter_responses_total{{code=\"{}xx\"}} {}\n", c, responses_by_class_[c].load());
}

}  // namespace kvr::ingress
