#pragma once
/// A worker set's media fetcher: the dimensions of images named by URL, without downloading
/// them whole. Created only for sets whose effective config scores prefix overlap and whose card
/// has a `multimodal` section (the watcher decides); elsewhere it does not exist.
///
/// Each URL is fetched with an HTTP Range request for its first 4 KiB, then 64 KiB if the
/// header does not fit (a 206, or a 200 whose whole body fits, is accepted), over kept-alive
/// connections pooled per host. Results are cached
/// by URL (bounded, LRU, with a TTL); concurrent requests for one URL share one fetch; at most
/// `max_concurrent` fetches run at once (the rest queue); each has one deadline over all of its
/// steps, name resolution included (actors/pipeline/name_resolver). URLs must be
/// http or https (certificates verified against the system's CAs and the host name, SNI
/// sent), and resolve to public addresses unless `allow_private` (core/media/fetch_policy), checked
/// again after each of at most 3 redirects. A detached actor drives its I/O
/// (actors/pipeline/component); callbacks run on that actor's thread. The fetcher outlives a
/// driver that dies: the restarted driver carries on with its cache and its queue.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "actors/pipeline/component.hpp"
#include "actors/pipeline/name_resolver.hpp"
#include "actors/pipeline/pipeline_settings.hpp"
#include "core/media/media.hpp"

namespace kvr {

struct media_fetch_counters {
  std::atomic<std::uint64_t> lookups{0};       ///< URLs asked for
  std::atomic<std::uint64_t> cache_hits{0};    ///< answered from the cache (or a fetch in flight)
  std::atomic<std::uint64_t> http_requests{0}; ///< range requests sent
  std::atomic<std::uint64_t> refusals{0};      ///< scheme or address not allowed
  std::atomic<std::uint64_t> failures{0};      ///< network errors, timeouts, bad statuses, not an image
};

class media_fetcher final : public pollable_component {
 public:
  using result = std::expected<image_dims, std::string>;
  using callback = std::function<void(const result&)>;

  /// `lookup`: how host names resolve (the system's resolver unless a test injects one).
  media_fetcher(media_fetch_settings settings, std::shared_ptr<media_fetch_counters> counters,
                name_resolver::lookup_fn lookup = name_resolver::system_lookup());
  ~media_fetcher() override;
  media_fetcher(const media_fetcher&) = delete;
  media_fetcher& operator=(const media_fetcher&) = delete;

  /// Calls `done` exactly once, on the fetcher's thread, with the image's dimensions or why not.
  /// Thread-safe.
  void fetch(std::string url, callback done);
  /// Runs the fetches' I/O for `budget`.
  void poll_for(std::chrono::milliseconds budget) override;

  struct impl;  ///< (the fetch operations of media_fetcher.cpp use it)

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace kvr
