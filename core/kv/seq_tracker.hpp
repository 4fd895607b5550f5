#pragma once
/// Per-publisher sequence tracking for KV-event batches (docs/kv-events.md, "Replay"): decides,
/// for every live or replayed batch, whether to apply it, skip it, hold it while a replay fills
/// a gap, or clear the worker's index entries first. The transport (ZMQ sockets, timers) lives
/// in actors/sources/kv_subscriber; this class only sees sequence numbers and opaque payloads, so it is
/// tested under simulated loss, late live copies of replayed batches, and engine restarts.
///
/// Live batches come over one ZeroMQ PUB/SUB connection per publisher, which loses messages
/// but never duplicates or reorders them. So a live sequence number at or below the last live
/// one can only come from a restarted engine.
///
/// Rules, with `next` the sequence number expected next and `last live` the highest live one:
/// - in order (`seq == next`): apply.
/// - late copy (`last live < seq < next`): a replay already delivered it; skip.
/// - restart (`seq <= last live`, `seq == 0`, or more than `restart_window` behind `next`): the
///   engine restarted; clear, then apply. If `seq > 0` the restarted engine's first batches
///   were lost (its new PUB socket drops what it sends before the router's SUB reconnects):
///   with a replay endpoint, clear and replay from 0 instead.
/// - gap (`seq > next`): with a replay endpoint, hold this batch and ask for replay from `next`;
///   replayed batches are applied in order, then the held live ones (duplicates skipped).
///   Without one: clear, then apply (the index rebuilds from live events).
/// - missing history (the replay starts after `next`, or skips inside): clear, then apply.
/// - warm start (`start_warm_replay`, before any batch): a replay from 0 right away, so a router
///   that subscribes to idle engines learns their caches without waiting for their next batch;
///   live batches meanwhile are held as in any replay. If it delivers nothing (an empty buffer,
///   or an engine that is not up yet) nothing is counted against the publisher: with no live
///   batch held the tracker is back to first contact, else it carries on from the held ones as
///   after any replay (a gap before them is replayed).
/// - first contact with `seq > 0`: treated as a gap from 0, so a router that starts after its
///   engines learns their caches from the replay buffer.
/// - a replay that ends having delivered nothing new (a publisher whose sequence jumped ahead
///   of its own buffer, a replay endpoint that answers with nothing) counts as an attempt; the
///   caller waits `replay_attempts()`-dependent back-off before the next one, and after
///   `max_replay_attempts` such replays in a row the tracker gives up: clear, then apply what
///   it held and carry on live.

#include <cstdint>
#include <algorithm>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

namespace kvr {

enum class seq_action : std::uint8_t {
  apply,            ///< apply this batch now
  skip_duplicate,   ///< already applied
  hold,             ///< a replay is in progress: the tracker keeps the batch until it ends
  request_replay,   ///< gap: the tracker keeps the batch; ask for replay from `replay_from()`
  clear_and_apply,  ///< clear the worker's index entries, then apply this batch
  /// The engine restarted and its first batches were lost: clear the worker's index entries,
  /// then ask for replay from `replay_from()` (0); the tracker keeps the batch meanwhile.
  clear_and_request_replay,
};

struct seq_counters {
  std::uint64_t applied = 0;
  std::uint64_t duplicates = 0;
  std::uint64_t gaps = 0;
  std::uint64_t restarts = 0;
  std::uint64_t replay_requests = 0;
  std::uint64_t replayed = 0;            ///< batches applied from replay
  std::uint64_t history_missing = 0;     ///< replays that could not go back far enough
  std::uint64_t replay_unavailable = 0;  ///< gaps with no replay endpoint, or failed replays
  std::uint64_t hold_overflows = 0;      ///< replays abandoned because too much live traffic waited
  std::uint64_t replays_without_progress = 0;  ///< replays that ended having delivered nothing new
  std::uint64_t replays_given_up = 0;    ///< gaps no replay could fill: cleared, carried on live
};

template <class Payload>
class seq_tracker {
 public:
  /// Far enough behind `next` that a batch can only be the sequence of a restarted engine.
  static constexpr std::uint64_t restart_window = 1000;
  /// Replays in a row that deliver nothing new before the tracker gives up on the gap.
  static constexpr std::uint32_t max_replay_attempts = 3;

  /// `replay_available`: the publisher has a replay endpoint. `max_held`: live batches kept
  /// while a replay runs; beyond it the replay is abandoned (clear and rebuild).
  explicit seq_tracker(bool replay_available, std::size_t max_held = 10000)
      : replay_available_(replay_available), max_held_(max_held) {}

  /// Asks for a replay from 0 before any batch came (see "warm start"); false without a replay
  /// endpoint or once batches came.
  bool start_warm_replay() {
    if (!replay_available_ || next_ || replaying_) return false;
    replaying_ = true;
    warm_ = true;
    replay_from_ = 0;
    next_ = 0;
    held_.clear();
    ++counters_.replay_requests;
    return true;
  }

  /// A live batch. On `hold` / `request_replay` the payload is moved into the tracker.
  seq_action on_live(std::uint64_t seq, Payload& payload) {
    const std::optional<std::uint64_t> last_live = std::exchange(last_live_, seq);
    if (!next_) {  // first contact
      if (seq == 0 || !replay_available_) return accept(seq);
      return start_replay(0, seq, payload);
    }
    if (seq < *next_) {
      if (seq == 0 || (last_live && seq <= *last_live) || *next_ - seq > restart_window) {
        ++counters_.restarts;
        abandon_replay();
        if (seq > 0 && replay_available_) {
          start_replay(0, seq, payload);
          return seq_action::clear_and_request_replay;
        }
        next_ = seq + 1;
        ++counters_.applied;
        return seq_action::clear_and_apply;
      }
      ++counters_.duplicates;  // a late copy of what a replay delivered
      return seq_action::skip_duplicate;
    }
    if (replaying_) {
      if (held_.size() >= max_held_) {
        ++counters_.hold_overflows;
        abandon_replay();
        next_ = seq + 1;
        ++counters_.applied;
        return seq_action::clear_and_apply;
      }
      held_.emplace_back(seq, std::move(payload));
      return seq_action::hold;
    }
    if (seq == *next_) return accept(seq);
    ++counters_.gaps;
    if (!replay_available_) {
      ++counters_.replay_unavailable;
      next_ = seq + 1;
      ++counters_.applied;
      return seq_action::clear_and_apply;
    }
    return start_replay(*next_, seq, payload);
  }

  /// A batch from the replay endpoint.
  seq_action on_replay(std::uint64_t seq, Payload&) {
    if (!replaying_ || seq < *next_) {
      ++counters_.duplicates;
      return seq_action::skip_duplicate;
    }
    if (seq > *next_) {  // the buffer no longer holds what we asked for
      ++counters_.history_missing;
      next_ = seq + 1;
      ++counters_.replayed;
      ++counters_.applied;
      return seq_action::clear_and_apply;
    }
    next_ = seq + 1;
    ++counters_.replayed;
    ++counters_.applied;
    return seq_action::apply;
  }

  /// What to do when a replay ends.
  struct replay_outcome {
    bool clear_first = false;   ///< clear the worker's entries before applying `to_apply`
    bool replay_again = false;  ///< a newer gap remains: ask for replay from `replay_from()`
  };

  /// The replay ended: `completed` = its end marker came; false = it failed or timed out.
  /// Appends the held live batches now due, in sequence order, to `to_apply`. When batches
  /// were lost while the replay ran, applies up to the hole and starts the next replay there.
  replay_outcome on_replay_end(bool completed, std::vector<Payload>& to_apply) {
    replay_outcome outcome;
    if (!replaying_) return outcome;
    replaying_ = false;
    std::stable_sort(held_.begin(), held_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    const bool progressed = *next_ > replay_from_;  // replayed batches moved the sequence on
    if (std::exchange(warm_, false) && !progressed) {  // a warm start that found nothing counts nothing
      if (held_.empty()) {  // an idle engine with an empty buffer, or not up yet: wait for first contact
        next_.reset();
        last_live_.reset();
        return outcome;
      }
      completed = true;  // live batches came meanwhile: carry on from them as after any replay
    } else if (completed && !progressed) {
      ++counters_.replays_without_progress;
      if (++attempts_without_progress_ >= max_replay_attempts) {
        ++counters_.replays_given_up;
        completed = false;  // give up on the gap: clear and carry on from what is held
      }
    } else if (progressed) {
      attempts_without_progress_ = 0;
    }
    if (!completed) {  // rebuild from live: clear, then apply everything held in order
      attempts_without_progress_ = 0;
      ++counters_.replay_unavailable;
      outcome.clear_first = true;
      if (!held_.empty()) next_ = held_.front().first;
    }
    while (!held_.empty()) {
      auto& [seq, payload] = held_.front();
      if (seq < *next_) {
        ++counters_.duplicates;
      } else if (seq == *next_ || outcome.clear_first) {
        to_apply.push_back(std::move(payload));
        next_ = seq + 1;
        ++counters_.applied;
      } else {  // lost while the replay ran: replay again from the hole, keep the rest held
        ++counters_.gaps;
        ++counters_.replay_requests;
        replaying_ = true;
        replay_from_ = *next_;
        outcome.replay_again = true;
        return outcome;
      }
      held_.pop_front();
    }
    return outcome;
  }

  [[nodiscard]] bool replaying() const { return replaying_; }
  /// Replays in a row that delivered nothing new (the caller backs off by it before the next).
  [[nodiscard]] std::uint32_t replay_attempts() const { return attempts_without_progress_; }
  [[nodiscard]] std::uint64_t replay_from() const { return replay_from_; }
  [[nodiscard]] const seq_counters& counters() const { return counters_; }

 private:
  seq_action accept(std::uint64_t seq) {
    next_ = seq + 1;
    ++counters_.applied;
    return seq_action::apply;
  }

  seq_action start_replay(std::uint64_t from, std::uint64_t seq, Payload& payload) {
    replaying_ = true;
    replay_from_ = from;
    next_ = from;
    held_.clear();
    held_.emplace_back(seq, std::move(payload));
    ++counters_.replay_requests;
    return seq_action::request_replay;
  }

  void abandon_replay() {
    replaying_ = false;
    attempts_without_progress_ = 0;
    held_.clear();
  }

  bool replay_available_;
  std::size_t max_held_;
  std::optional<std::uint64_t> next_;
  std::optional<std::uint64_t> last_live_;  ///< the highest live sequence number since the last restart
  bool replaying_ = false;
  bool warm_ = false;  ///< the replay in progress is the warm start's
  std::uint64_t replay_from_ = 0;
  std::uint32_t attempts_without_progress_ = 0;
  std::deque<std::pair<std::uint64_t, Payload>> held_;
  seq_counters counters_;
};

}  // namespace kvr
