#pragma once
/// The mocker's side of SGLang's disaggregated serving: both legs of a request carry the same
/// `bootstrap_room`. The prefill worker computes the prompt and holds its blocks in the room;
/// the decode worker asks the prefill worker's bootstrap server for the room
/// (`GET /mocker/bootstrap/ROOM`), which answers once the prefill is done. The prefill leg is
/// answered once its blocks were taken ("pushed"); either side gives up after the lease.
///
/// Thread-safe; the callbacks run on the thread that completes the meeting (post them to your
/// own executor). A room lives only while one side waits for the other.

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace kvr::mocker {

class bootstrap_rooms {
 public:
  using blocks = std::vector<std::uint64_t>;  ///< the prompt's engine block hashes
  using sent_handler = std::function<void(bool taken)>;
  using ready_handler = std::function<void(std::optional<blocks>)>;

  /// Prefill side: `room`'s blocks are computed; `sent(true)` once the decode side took them.
  void prefilled(std::uint64_t room, blocks hashes, sent_handler sent);
  /// Decode side: `ready` gets `room`'s blocks once its prefill is done.
  void fetch(std::uint64_t room, ready_handler ready);
  /// The prefill side's wait ended: `sent(false)` unless the blocks were taken meanwhile.
  void give_up_prefill(std::uint64_t room);
  /// The decode side's wait ended: `ready(nullopt)` unless the blocks came meanwhile.
  void give_up_fetch(std::uint64_t room);
  /// Rooms with a side waiting.
  [[nodiscard]] std::size_t open();

 private:
  struct room_state {
    std::optional<blocks> hashes;  ///< the prefill is done
    sent_handler sent;
    ready_handler ready;  ///< a decode side waits
  };
  std::mutex mutex_;
  std::unordered_map<std::uint64_t, room_state> rooms_;
};

}  // namespace kvr::mocker
