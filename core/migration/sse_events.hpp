#pragma once
/// Server-sent events read incrementally off a streamed answer, as its bytes pass: each event's
/// `data` (its `data:` lines joined by "\n", one leading space of each dropped, as the SSE
/// specification says), whatever the byte boundaries. Lines end in "\n" or "\r\n"; comments and
/// other fields are skipped. An event longer than the bound stops the reader (`overflowed`):
/// the stream is relayed still, but no longer understood.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace kvr {

class sse_reader {
 public:
  /// An engine's event is one token's chunk (a few hundred bytes) or a final usage chunk.
  static constexpr std::size_t default_max_event_bytes = 1 << 20;

  explicit sse_reader(std::size_t max_event_bytes = default_max_event_bytes) : max_event_bytes_(max_event_bytes) {}

  /// Reads `bytes`; `on_event` gets the data of each event they complete, in order.
  template <class OnEvent>
  void feed(std::string_view bytes, OnEvent&& on_event) {
    while (!bytes.empty() && !overflowed_) {
      const std::size_t end = bytes.find('\n');
      if (end == std::string_view::npos) {
        append_partial(bytes);
        return;
      }
      append_partial(bytes.substr(0, end));
      bytes.remove_prefix(end + 1);
      if (overflowed_) return;
      if (end_line()) {
        on_event(std::string_view(data_));
        data_.clear();
        has_data_ = false;
      }
    }
  }

  [[nodiscard]] bool overflowed() const { return overflowed_; }
  /// Forgets a partial event (a new stream starts).
  void reset();

 private:
  void append_partial(std::string_view bytes);
  /// The line in `line_` is complete: true when it ended an event that has data.
  bool end_line();

  std::size_t max_event_bytes_;
  std::string line_;  ///< the line being read
  std::string data_;  ///< the event's data so far
  bool has_data_ = false;
  bool overflowed_ = false;
};

}  // namespace kvr
