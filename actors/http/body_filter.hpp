#pragma once
/// What a `proxy_stream` lets see, and rewrite, an answer's body on its way to the client.
/// Not part of the ingress's interface.

#include <string_view>

namespace kvr::ingress {

/// Sees, and may rewrite, an answer's body on its way to the client (a migratable stream's
/// events: actors/http/stream_migration.hpp).
class body_filter {
 public:
  virtual ~body_filter() = default;
  struct result {
    std::string_view out;       ///< what goes to the client instead (valid until the next call)
    bool worker_failed = false;  ///< the body says the worker failed (an engine's error event): cut here
  };
  /// The answer's head is in: its status, and whether it is an event stream (chunked,
  /// `text/event-stream`).
  virtual void on_head(unsigned status, bool event_stream) = 0;
  /// The body's next bytes.
  [[nodiscard]] virtual result filter(std::string_view bytes) = 0;
};

}  // namespace kvr::ingress
