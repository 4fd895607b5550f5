#pragma once
/// The mocker's side of disaggregated serving, vLLM NIXL style (SGLang's is bootstrap_rooms.hpp):
/// a prefill worker leases the prompt blocks it computed under a transfer id; a decode worker
/// pulls them over loopback HTTP (`GET /mocker/kv_transfer/ID` answers the blocks' engine
/// hashes) and checks them against its own hashes of the prompt, so a hand-off for another
/// prompt, or an expired lease, is caught.

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

namespace kvr::mocker {

/// Prefill side: leased prompt blocks, by transfer id.
class kv_leases {
 public:
  explicit kv_leases(std::chrono::seconds lease) : lease_(lease) {}
  /// Leases `hashes`; returns their transfer id.
  std::string add(std::vector<std::uint64_t> hashes);
  /// The hashes of a live lease (which then ends: a transfer is pulled once).
  std::optional<std::vector<std::uint64_t>> take(const std::string& id);
  [[nodiscard]] std::size_t live();

 private:
  struct lease {
    std::vector<std::uint64_t> hashes;
    std::chrono::steady_clock::time_point until;
  };
  void expire(std::chrono::steady_clock::time_point now);
  std::chrono::seconds lease_;
  std::mutex mutex_;
  std::uint64_t next_ = 1;
  std::unordered_map<std::string, lease> leases_;
};

/// Decode side: what a pull brought (the prefill worker's hashes), or why it failed.
struct pull_result {
  bool ok = false;
  std::vector<std::uint64_t> hashes;
  std::string error;
};

/// Pulls the blocks at `path` from the prefill worker at host:port (vLLM: its transfer,
/// `/mocker/kv_transfer/ID`; SGLang: its bootstrap server's room, `/mocker/bootstrap/ROOM`),
/// giving up after `timeout`; `done` runs on `executor`.
void pull_kv(boost::asio::any_io_executor executor, const std::string& host, std::uint16_t port, const std::string& path,
             std::chrono::seconds timeout, std::function<void(pull_result)> done);

}  // namespace kvr::mocker
