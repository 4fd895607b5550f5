#pragma once
/// The worker sets' part of `GET /metrics` (Prometheus text): per worker its health, bookings,
/// busy flag and engine gauges; per set its queue, pipeline components, hashing and scrapes.
/// And `GET /v1/router/sets`: what `kvrouter explain` prints, plus each set's live state.
/// Both read the scorers' published snapshots and the sets' counters; never message an actor.

#include <string>

#include <nlohmann/json.hpp>

#include "actors/http/routing_table.hpp"

namespace kvr {

void write_set_metrics(std::string& out, const routing_table& table);

/// One worker's live state as /v1/router/sets and the status page show it.
[[nodiscard]] nlohmann::json live_worker_json(const scorer_snapshot::worker& worker, const std::string& url);

/// The table's sets as JSON, each with `live`: per worker its health, bookings (this replica's,
/// and other replicas' under "remote"), busy flag and last engine scrape; the peers heard from;
/// the queue's depth and counters. `replication` (JSON text, may be empty) is the process's
/// replica-sync status, shown as "replication".
[[nodiscard]] std::string sets_page(const routing_table& table, const std::string& replication = {});

}  // namespace kvr
