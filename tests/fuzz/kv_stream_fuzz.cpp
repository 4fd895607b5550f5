// libFuzzer target: a publisher's whole stream as the subscriber sees it. The input is a
// script of live batches, replayed batches and replay ends with arbitrary sequence numbers and
// payloads; each goes through the sequence tracker and, where it says so, the decoder and the
// index, as actors/sources/kv_subscriber drives them. Checked on every step:
// - what the tracker says it applied is what was applied;
// - between two clears, applied batches go strictly up in sequence (never twice, never back);
// - the index stays within its bound.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/kv/kv_apply.hpp"
#include "core/kv/kv_wire.hpp"
#include "core/kv/seq_tracker.hpp"

namespace {

struct numbered_payload {
  std::uint64_t seq = 0;
  std::vector<std::uint8_t> bytes;
};

/// The subscriber's side of the contract, with the checks.
class stream_under_test {
 public:
  explicit stream_under_test(bool replay_available) : tracker_(replay_available, /*max_held=*/16) {}

  /// As the subscriber does when it starts: a replay from 0 before any batch.
  void warm_start() { (void)tracker_.start_warm_replay(); }

  void live(numbered_payload payload) {
    const std::uint64_t seq = payload.seq;
    switch (tracker_.on_live(seq, payload)) {
      case kvr::seq_action::apply: apply(payload); break;
      case kvr::seq_action::clear_and_apply: clear(), apply(payload); break;
      case kvr::seq_action::clear_and_request_replay: clear(); break;
      case kvr::seq_action::skip_duplicate:
      case kvr::seq_action::hold:
      case kvr::seq_action::request_replay: break;
    }
  }

  void replayed(numbered_payload payload) {
    switch (tracker_.on_replay(payload.seq, payload)) {
      case kvr::seq_action::apply: apply(payload); break;
      case kvr::seq_action::clear_and_apply: clear(), apply(payload); break;
      default: break;
    }
  }

  void replay_end(bool completed) {
    std::vector<numbered_payload> due;
    const auto outcome = tracker_.on_replay_end(completed, due);
    if (outcome.clear_first) clear();
    for (auto& payload : due) apply(payload);
  }

  void check() const {
    if (tracker_.counters().applied != applied_) __builtin_trap();
    if (index_.total_blocks() > index_.max_blocks()) __builtin_trap();
  }

 private:
  void clear() {
    index_.remove_worker(worker);
    groups_.clear(worker);
    last_applied_.reset();
  }
  void apply(const numbered_payload& payload) {
    ++applied_;
    if (last_applied_ && payload.seq <= *last_applied_) __builtin_trap();  // out of order, no clear
    last_applied_ = payload.seq;
    kvr::kv_batch batch;
    if (decoder_.decode_batch(payload.bytes, batch)) kvr::apply_batch(index_, worker, batch, counters_, &groups_);
  }

  static constexpr kvr::worker_id worker = 3;
  kvr::seq_tracker<numbered_payload> tracker_;
  kvr::kv_wire_decoder decoder_;
  kvr::prefix_index index_{4, 4096};
  kvr::kv_groups groups_{4, 4096};
  kvr::kv_event_counters counters_;
  std::uint64_t applied_ = 0;
  std::optional<std::uint64_t> last_applied_;
};

/// Reads the script (after a first byte: bit 0 = the publisher has a replay endpoint, bit 1 =
/// the subscriber starts with a warm replay): per step an op byte (low 2 bits: live, replayed, replay end completed,
/// replay end failed), then for batches a sequence byte (a small step from the previous
/// number, or a jump) and a length byte followed by that many payload bytes.
class script {
 public:
  explicit script(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}
  [[nodiscard]] bool done() const { return at_ >= bytes_.size(); }
  std::uint8_t byte() { return done() ? 0 : bytes_[at_++]; }
  std::uint64_t next_seq() {
    const std::uint8_t code = byte();
    if (code < 0xf0) seq_ = code < 0x80 ? seq_ + (code & 0x0f) : (seq_ > (code & 0x0f) ? seq_ - (code & 0x0f) : 0);
    else if (code == 0xf0) seq_ = 0;                      // an engine restart
    else seq_ += std::uint64_t{1} << (code & 0x0f) * 4;   // a jump far ahead
    return seq_;
  }
  std::vector<std::uint8_t> payload() {
    const std::size_t length = std::min<std::size_t>(byte(), bytes_.size() - std::min(at_, bytes_.size()));
    std::vector<std::uint8_t> out(bytes_.begin() + static_cast<std::ptrdiff_t>(at_),
                                  bytes_.begin() + static_cast<std::ptrdiff_t>(at_ + length));
    at_ += length;
    return out;
  }

 private:
  std::span<const std::uint8_t> bytes_;
  std::size_t at_ = 0;
  std::uint64_t seq_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  stream_under_test stream(/*replay_available=*/(data[0] & 1) != 0);
  if ((data[0] & 2) != 0) stream.warm_start();
  script steps(std::span(data + 1, size - 1));
  for (int step = 0; step < 4096 && !steps.done(); ++step) {
    switch (steps.byte() & 3) {
      case 0: {
        const std::uint64_t seq = steps.next_seq();
        stream.live({seq, steps.payload()});
        break;
      }
      case 1: {
        const std::uint64_t seq = steps.next_seq();
        stream.replayed({seq, steps.payload()});
        break;
      }
      case 2: stream.replay_end(true); break;
      default: stream.replay_end(false); break;
    }
    stream.check();
  }
  return 0;
}
