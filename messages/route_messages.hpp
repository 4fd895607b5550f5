#pragma once
/// The request path's messages: ingress asks a worker set's hasher / scorer for a worker, and
/// reports each routed request's lifecycle back to the scorer.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/prompt/openai.hpp"
#include "core/metrics/engine_metrics.hpp"
#include "core/prompt/prompt_plan.hpp"
#include "core/routing/admission_queue.hpp"
#include "core/routing/lifecycle.hpp"

namespace kvr {

/// Where the answer goes: a callback that posts back to the connection's I/O thread. Called
/// exactly once, on an actor's thread.
using route_sink = std::function<void(route_decision)>;

/// A routing job, created by ingress, completed by the hasher (block hashes), answered by the
/// scorer. Travels as a shared pointer (never serialized).
struct route_job {
  std::uint64_t request_id = 0;
  std::shared_ptr<const routing_request> request;
  std::vector<std::uint32_t> excluded_workers;  ///< workers that already failed this request
  bool dry_run = false;                         ///< decide, but book nothing
  request_priority priority = request_priority::normal;  ///< its place in the set's queue, should it wait
  std::uint64_t session = 0;                    ///< its conversation (session affinity); 0 = none
  bool disaggregate = false;                    ///< a disaggregated set: choose a prefill and a decode worker
  prompt_plan plan;                             ///< what the hasher does with the prompt (ingress plans it)
  std::vector<std::uint64_t> sequence_hashes;   ///< the prompt's blocks (hasher)
  std::uint32_t prompt_tokens = 0;              ///< exact length once tokenized; 0 = the request's estimate
  route_sink reply;
};
using route_job_ptr = std::shared_ptr<route_job>;

/// The media fetcher's answer for one image of a job a hasher parked: its placeholder-token
/// count and hash, or nothing (the image could not be resolved: text-only fallback).
struct media_resolution {
  std::uint64_t parked_id = 0;  ///< the hasher's key of the parked job
  std::size_t slot = 0;         ///< the image's position among the request's images
  bool ok = false;
  std::uint32_t tokens = 0;
  std::uint64_t hash = 0;
};
using media_resolution_ptr = std::shared_ptr<const media_resolution>;

/// Bookings, first tokens, ends and failures of requests, for the scorer's loads: one I/O
/// thread's events for one set, in the order they happened, applied in that order. I/O threads
/// batch the steps of requests they routed themselves (round-robin, random); a step of a request
/// the scorer side routed is applied in the scorer's core at once (actors/pipeline/scorer_core).
using lifecycle_batch_ptr = std::shared_ptr<const std::vector<lifecycle_event>>;

}  // namespace kvr

namespace kvr {

/// One scrape of a worker's `/metrics` (engine-metrics scraper -> scorer).
struct engine_scrape {
  std::uint32_t worker = 0;
  engine_metrics metrics;
};
using engine_scrape_ptr = std::shared_ptr<const engine_scrape>;

}  // namespace kvr
