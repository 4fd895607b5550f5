#pragma once
/// The request path's messages: ingress asks a worker set's hasher / scorer for a worker, and
/// reports each routed request's lifecycle back to the scorer.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/prompt/openai.hpp"

namespace kvr {

/// One candidate as the scorer saw it (reported in dry-run answers).
struct candidate_view {
  std::uint32_t worker = 0;
  std::uint32_t overlap_blocks = 0;
  std::uint64_t active_prefill_tokens = 0;
  std::uint64_t active_decode_blocks = 0;
  bool healthy = true;
};

/// The scorer's answer.
struct route_decision {
  bool ok = false;
  api_errc error = api_errc::no_worker_available;  ///< when !ok
  std::string error_message;
  std::uint32_t worker = 0;          ///< index into the set's workers
  std::uint32_t overlap_blocks = 0;  ///< cached blocks of the prompt on that worker
  double cost = 0.0;
  std::uint32_t prompt_blocks = 0;
  std::uint32_t prompt_tokens = 0;   ///< exact when tokenized, else the request's estimate
  std::vector<candidate_view> candidates;  ///< filled for dry runs only
};

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

/// One step in the life of a request that ingress routed itself: round-robin and random
/// decisions need no load, so I/O threads take them without a round trip to the scorer and
/// report what the scorer must book and release afterwards, in batches.
struct lifecycle_event {
  enum class kind : std::uint8_t {
    booked,         ///< routed to `worker` with `prompt_tokens` (the request's estimate)
    first_token,    ///< the worker's first bytes arrived: its prefill is done
    finished,       ///< ended, however it ended: release the booking
    worker_failed,  ///< `worker` failed before answering: release, keep the worker out a while
  };
  kind what = kind::booked;
  std::uint64_t request_id = 0;
  std::uint32_t worker = 0;
  std::uint32_t prompt_tokens = 0;
};
/// Applied in order by the scorer. One I/O thread's events for one set, in the order they happened.
using lifecycle_batch_ptr = std::shared_ptr<const std::vector<lifecycle_event>>;

/// How a routed request ended.
enum class request_outcome : std::uint8_t { completed, client_disconnected, worker_error };

}  // namespace kvr
