#include "actors/http/set_metrics.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kvr {
namespace {

/// The set's queue: depth by class, waits, and why requests left it without a worker.
void write_admission_metrics(std::string& out, const routing_table& table) {
  out += "# HELP kvrouter_queue_depth Requests waiting in the set's queue, by the priority they came with.\n"
         "# TYPE kvrouter_queue_depth gauge\n";
  for (const worker_set_route& set : table.sets)
    for (std::size_t c = 0; c < priority_classes; ++c) {
      const auto priority = static_cast<request_priority>(c);
      out += fmt::format("kvrouter_queue_depth{{set=\"{}\",model=\"{}\",priority=\"{}\"}} {}\n", set.name, set.model,
                         to_string(priority), set.snapshot->queue_depth(priority));
    }
  out += "# HELP kvrouter_queue_wait_seconds How long requests waited in the set's queue before a worker took them.\n"
         "# TYPE kvrouter_queue_wait_seconds histogram\n";
  for (const worker_set_route& set : table.sets) {
    const latency_histogram& wait = set.snapshot->load()->admission.wait;
    for (std::size_t i = 0; i <= latency_histogram::bounds.size(); ++i)
      out += fmt::format("kvrouter_queue_wait_seconds_bucket{{set=\"{}\",model=\"{}\",le=\"{}\"}} {}\n", set.name, set.model,
                         i < latency_histogram::bounds.size() ? fmt::format("{}", latency_histogram::bounds[i]) : "+Inf",
                         wait.cumulative(i));
    out += fmt::format("kvrouter_queue_wait_seconds_sum{{set=\"{}\",model=\"{}\"}} {}\n", set.name, set.model, wait.sum_seconds());
    out += fmt::format("kvrouter_queue_wait_seconds_count{{set=\"{}\",model=\"{}\"}} {}\n", set.name, set.model, wait.count());
  }
  out += "# HELP kvrouter_queue_rejections_total Requests that left the set's queue without a worker, by reason.\n"
         "# TYPE kvrouter_queue_rejections_total counter\n";
  for (const worker_set_route& set : table.sets) {
    const admission_status& a = set.snapshot->load()->admission;
    for (const auto& [reason, count] : {std::pair{"queue_full", a.rejected_full}, std::pair{"queue_timeout", a.timed_out},
                                        std::pair{"client_left", a.withdrawn}})
      out += fmt::format("kvrouter_queue_rejections_total{{set=\"{}\",model=\"{}\",reason=\"{}\"}} {}\n", set.name,
                         set.model, reason, count);
  }
}

/// Streams continued on another worker, and the tokens they carried (docs/migration.md).
void write_migration_metrics(std::string& out, const routing_table& table) {
  ingress::migration_counters::write_started_help(out);
  for (const worker_set_route& set : table.sets) set.migrations->write_started(out, set.name, set.model);
  ingress::migration_counters::write_carried_help(out);
  for (const worker_set_route& set : table.sets) set.migrations->write_carried(out, set.name, set.model);
  ingress::migration_counters::write_from_text_help(out);
  for (const worker_set_route& set : table.sets) set.migrations->write_from_text(out, set.name, set.model);
}

}  // namespace

void write_set_metrics(std::string& out, const routing_table& table) {
  write_migration_metrics(out, table);
  auto family = [&](std::string_view name, std::string_view help, std::string_view type, auto value_of) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    for (const worker_set_route& set : table.sets) {
      const auto snapshot = set.snapshot->load();
      for (const auto& w : snapshot->workers)
        out += fmt::format("{}{{set=\"{}\",model=\"{}\",worker=\"{}\"}} {}\n", name, set.name, set.model, w.name, value_of(w));
    }
  };
  using worker = scorer_snapshot::worker;
  family("kvrouter_worker_healthy", "1 if the worker takes requests.", "gauge", [](const worker& w) { return w.healthy ? 1 : 0; });
  family("kvrouter_worker_active_prefill_tokens", "Booked prompt tokens not yet prefilled.", "gauge",
         [](const worker& w) { return w.prefill_tokens; });
  family("kvrouter_worker_active_decode_blocks", "KV blocks held by requests in flight.", "gauge",
         [](const worker& w) { return w.decode_blocks; });
  family("kvrouter_worker_active_requests", "Requests in flight.", "gauge", [](const worker& w) { return w.requests; });
  family("kvrouter_worker_remote_active_prefill_tokens",
         "Prompt tokens other router replicas booked on the worker, not yet prefilled (replica sync).", "gauge",
         [](const worker& w) { return w.remote.prefill_tokens; });
  family("kvrouter_worker_remote_active_decode_blocks", "KV blocks held by other replicas' requests in flight.", "gauge",
         [](const worker& w) { return w.remote.decode_blocks; });
  family("kvrouter_worker_remote_active_requests", "Other replicas' requests in flight on the worker.", "gauge",
         [](const worker& w) { return w.remote.requests; });
  family("kvrouter_worker_index_blocks", "Blocks the prefix index holds for the worker.", "gauge",
         [](const worker& w) { return w.index_blocks; });
  family("kvrouter_worker_routed_total", "Requests routed to the worker.", "counter", [](const worker& w) { return w.routed; });
  family("kvrouter_worker_failures_total", "Failures reported for the worker.", "counter",
         [](const worker& w) { return w.failures; });
  family("kvrouter_worker_engine_restarts_total", "Engine restarts seen in the worker's scrapes (its index entries dropped).",
         "counter", [](const worker& w) { return w.engine_restarts; });
  family("kvrouter_worker_busy", "1 while the worker is busy (booked prefill past the threshold, or engine requests waiting).",
         "gauge", [](const worker& w) { return w.busy ? 1 : 0; });
  auto engine_family = [&](std::string_view name, std::string_view help, auto value_of) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", name, help, name);
    for (const worker_set_route& set : table.sets)
      for (const auto& w : set.snapshot->load()->workers)
        if (const auto value = value_of(w.engine))
          out += fmt::format("{}{{set=\"{}\",model=\"{}\",worker=\"{}\"}} {}\n", name, set.name, set.model, w.name, *value);
  };
  engine_family("kvrouter_worker_engine_waiting_requests", "Requests waiting in the engine, as its last scrape said.",
                [](const engine_metrics& e) { return e.waiting_requests; });
  engine_family("kvrouter_worker_engine_running_requests", "Requests running in the engine, as its last scrape said.",
                [](const engine_metrics& e) { return e.running_requests; });
  engine_family("kvrouter_worker_engine_kv_cache_usage", "Fraction of the engine's KV cache in use (0-1), as its last scrape said.",
                [](const engine_metrics& e) { return e.kv_cache_usage; });
  write_admission_metrics(out, table);
  out += "# HELP kvrouter_component_restarts_total Restarts of a set's pipeline component after it died.\n"
         "# TYPE kvrouter_component_restarts_total counter\n";
  for (const worker_set_route& set : table.sets)
    for (const component_status& c : set.components)
      out += fmt::format("kvrouter_component_restarts_total{{set=\"{}\",model=\"{}\",component=\"{}\"}} {}\n", set.name,
                         set.model, c.name, c.restarts);
  out += "# HELP kvrouter_component_running 1 while a set's pipeline component runs (0: waiting for its restart).\n"
         "# TYPE kvrouter_component_running gauge\n";
  for (const worker_set_route& set : table.sets)
    for (const component_status& c : set.components)
      out += fmt::format("kvrouter_component_running{{set=\"{}\",model=\"{}\",component=\"{}\"}} {}\n", set.name, set.model,
                         c.name, c.running ? 1 : 0);
  out += "# HELP kvrouter_set_restarts_total Restarts of a whole set after its scorer or a hasher died.\n"
         "# TYPE kvrouter_set_restarts_total counter\n";
  for (const worker_set_route& set : table.sets)
    out += fmt::format("kvrouter_set_restarts_total{{set=\"{}\",model=\"{}\"}} {}\n", set.name, set.model, set.restarts);
  // A figure per set from its scorer's snapshot.
  auto snapshot_family = [&](std::string_view name, std::string_view help, std::string_view type, auto value_of) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    for (const worker_set_route& set : table.sets)
      out += fmt::format("{}{{set=\"{}\",model=\"{}\"}} {}\n", name, set.name, set.model, value_of(*set.snapshot->load()));
  };
  snapshot_family("kvrouter_set_kv_batches_total", "KV-event batches applied.", "counter",
                  [](const scorer_snapshot& s) { return s.kv_batches; });
  snapshot_family("kvrouter_set_prompt_blocks_routed_total", "Blocks of the prompts routed with prefix overlap scored.", "counter",
                  [](const scorer_snapshot& s) { return s.prompt_blocks_routed; });
  snapshot_family("kvrouter_set_overlap_blocks_routed_total",
                  "Of them, blocks the chosen worker cached (hit rate = this / prompt blocks).", "counter",
                  [](const scorer_snapshot& s) { return s.overlap_blocks_routed; });
  snapshot_family("kvrouter_set_session_bindings", "Conversations bound to a worker (session affinity).", "gauge",
                  [](const scorer_snapshot& s) { return s.session_bindings; });
  snapshot_family("kvrouter_set_session_moves_total",
                  "Bound conversations moved to another worker (theirs down, busy or too costly).", "counter",
                  [](const scorer_snapshot& s) { return s.session_moves; });
  snapshot_family("kvrouter_set_replica_peers", "Other router replicas heard from within the peer timeout.", "gauge",
                  [](const scorer_snapshot& s) { return s.peers.size(); });
  snapshot_family("kvrouter_set_replica_gaps_total", "Peer messages lost between two that came (healed by snapshots).", "counter",
                  [](const scorer_snapshot& s) { return s.peer_counters.gaps; });
  snapshot_family("kvrouter_set_replica_unknown_workers_total", "Peer bookings on a worker this replica does not have, dropped.",
                  "counter", [](const scorer_snapshot& s) { return s.peer_counters.unknown_workers; });
  snapshot_family("kvrouter_set_replica_peers_dropped_total", "Peers dropped with their bookings after falling silent.", "counter",
                  [](const scorer_snapshot& s) { return s.peer_counters.peers_dropped; });
  snapshot_family("kvrouter_set_replica_snapshots_total", "Whole peer snapshots applied.", "counter",
                  [](const scorer_snapshot& s) { return s.peer_counters.snapshots; });
  // A counter per set, read from one of the set's shared counter blocks (absent: no sample).
  auto counter_family = [&](std::string_view name, std::string_view help, auto counters_of, auto value_of) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n", name, help, name);
    for (const worker_set_route& set : table.sets)
      if (const auto* counters = counters_of(set))
        out += fmt::format("{}{{set=\"{}\",model=\"{}\"}} {}\n", name, set.name, set.model, value_of(*counters));
  };
  auto hasher_family = [&](std::string_view name, std::string_view help, auto value_of) {
    counter_family(name, help, [](const worker_set_route& set) { return set.hashing.get(); }, value_of);
  };
  hasher_family("kvrouter_set_prompts_tokenized_total", "Text and chat prompts tokenized.",
                [](const hasher_counters& c) { return c.prompts_tokenized.load(); });
  hasher_family("kvrouter_set_chats_rendered_total", "Chat requests rendered with the set's chat template.",
                [](const hasher_counters& c) { return c.chats_rendered.load(); });
  hasher_family("kvrouter_set_chat_render_errors_total", "Chat requests the template refused (routed on load).",
                [](const hasher_counters& c) { return c.chat_render_errors.load(); });
  hasher_family("kvrouter_set_segment_cache_hits_total", "Prompt segments whose token ids were reused.",
                [](const hasher_counters& c) { return c.segment_cache_hits.load(); });
  hasher_family("kvrouter_set_segment_cache_misses_total", "Prompt segments tokenized afresh (128 bytes or more).",
                [](const hasher_counters& c) { return c.segment_cache_misses.load(); });
  hasher_family("kvrouter_set_images_resolved_total", "Images spliced into prompts and hashed (multimodal routing).",
                [](const hasher_counters& c) { return c.images_resolved.load(); });
  hasher_family("kvrouter_set_image_bytes_hashed_total", "Decoded bytes of data-URI images hashed.",
                [](const hasher_counters& c) { return c.image_bytes_hashed.load(); });
  hasher_family("kvrouter_set_image_fallbacks_total", "Image requests routed on their text before the first image.",
                [](const hasher_counters& c) { return c.image_fallbacks.load(); });
  hasher_family("kvrouter_set_image_urls_unresolved_total", "Image URLs not resolved (no media fetcher, or too many waiting).",
                [](const hasher_counters& c) { return c.image_urls_unresolved.load(); });
  hasher_family("kvrouter_set_media_lookups_total", "Image URLs asked of the media fetcher.",
                [](const hasher_counters& c) { return c.media.lookups.load(); });
  hasher_family("kvrouter_set_media_cache_hits_total", "Image dimensions answered from the media cache.",
                [](const hasher_counters& c) { return c.media.cache_hits.load(); });
  hasher_family("kvrouter_set_media_fetches_total", "HTTP range requests the media fetcher sent.",
                [](const hasher_counters& c) { return c.media.http_requests.load(); });
  hasher_family("kvrouter_set_media_refusals_total", "Image URLs refused (scheme, or a private / loopback address).",
                [](const hasher_counters& c) { return c.media.refusals.load(); });
  hasher_family("kvrouter_set_media_failures_total", "Image fetches that failed (network, timeout, status, not an image).",
                [](const hasher_counters& c) { return c.media.failures.load(); });
  auto scrape_family = [&](std::string_view name, std::string_view help, auto value_of) {
    counter_family(name, help, [](const worker_set_route& set) { return set.scrapes.get(); }, value_of);
  };
  scrape_family("kvrouter_set_engine_scrapes_total", "Engine-metrics scrapes that told the router something.",
                [](const engine_scrape_counters& c) { return c.ok.load(); });
  scrape_family("kvrouter_set_engine_scrape_failures_total", "Engine-metrics scrapes with no answer, or not HTTP 200.",
                [](const engine_scrape_counters& c) { return c.failed.load(); });
  scrape_family("kvrouter_set_engine_scrapes_unusable_total", "Engine-metrics answers without any engine load gauge.",
                [](const engine_scrape_counters& c) { return c.unusable.load(); });
  scrape_family("kvrouter_set_engine_metrics_malformed_lines_total", "Lines of engine-metrics answers that were not Prometheus text.",
                [](const engine_scrape_counters& c) { return c.malformed_lines.load(); });
}

namespace {

nlohmann::json engine_json(const engine_metrics& e) {
  nlohmann::json out = nlohmann::json::object();
  auto put = [&out](const char* key, const auto& value) {
    if (value) out[key] = *value;
  };
  put("waiting_requests", e.waiting_requests);
  put("running_requests", e.running_requests);
  put("kv_cache_usage", e.kv_cache_usage);
  put("block_size", e.block_size);
  put("num_gpu_blocks", e.num_gpu_blocks);
  put("max_num_batched_tokens", e.max_num_batched_tokens);
  return out;
}

}  // namespace

nlohmann::json live_worker_json(const scorer_snapshot::worker& worker, const std::string& url) {
  const auto age = worker.last_kv_batch_age;
  return {{"name", worker.name},
          {"url", url},
          {"healthy", worker.healthy},
          {"busy", worker.busy},
          {"active_requests", worker.requests},
          {"active_prefill_tokens", worker.prefill_tokens},
          {"active_decode_blocks", worker.decode_blocks},
          {"remote",
           {{"active_requests", worker.remote.requests},
            {"active_prefill_tokens", worker.remote.prefill_tokens},
            {"active_decode_blocks", worker.remote.decode_blocks}}},
          {"index_blocks", worker.index_blocks},
          {"last_kv_batch_age_s", age ? nlohmann::json(std::chrono::duration<double>(*age).count()) : nlohmann::json(nullptr)},
          {"routed", worker.routed},
          {"failures", worker.failures},
          {"engine_restarts", worker.engine_restarts},
          {"engine", engine_json(worker.engine)}};
}

std::string sets_page(const routing_table& table, const std::string& replication) {
  nlohmann::json page = nlohmann::json::parse(table.sets_json);
  if (!replication.empty()) page["replication"] = nlohmann::json::parse(replication);
  for (std::size_t i = 0; i < table.sets.size() && i < page["sets"].size(); ++i) {
    const scorer_snapshot_cell& cell = *table.sets[i].snapshot;
    const auto snapshot = cell.load();
    nlohmann::json workers = nlohmann::json::array();
    const worker_set_route& set = table.sets[i];
    for (std::size_t w = 0; w < snapshot->workers.size(); ++w)
      workers.push_back(live_worker_json(snapshot->workers[w], w < set.workers.size() ? set.workers[w].url : std::string()));
    const admission_status& a = snapshot->admission;
    nlohmann::json peers = nlohmann::json::array();
    for (const peer_view& p : snapshot->peers)
      peers.push_back({{"replica", p.replica},
                       {"last_message_age_s", std::chrono::duration<double>(p.since_heard).count()},
                       {"last_snapshot_age_s", p.since_snapshot ? nlohmann::json(std::chrono::duration<double>(*p.since_snapshot).count())
                                                                : nlohmann::json(nullptr)},
                       {"bookings", p.bookings}});
    page["sets"][i]["live"] = {{"workers", std::move(workers)},
                               {"peers", std::move(peers)},
                               {"queue",
                                {{"enabled", a.enabled},
                                 {"depth",
                                  {{"high", cell.queue_depth(request_priority::high)},
                                   {"normal", cell.queue_depth(request_priority::normal)},
                                   {"low", cell.queue_depth(request_priority::low)}}},
                                 {"admitted_after_wait", a.admitted_after_wait},
                                 {"rejected_full", a.rejected_full},
                                 {"timed_out", a.timed_out},
                                 {"client_left", a.withdrawn}}}};
  }
  return page.dump();
}

}  // namespace kvr
