// libFuzzer target: arbitrary bytes as what arrives on the replicas' NATS subjects. The input is
// a script of messages (a length byte pair before each payload, a time step after it), each
// decoded and, when it decodes, applied to a set's remote bookings as a peer's would be. The
// decoder must name an error or give a message that encodes back to itself; the merge must
// keep its bounds (peers, bookings per peer), count sanely, and drop everything once its peers
// fall silent.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <variant>

#include "core/replica/peer_subjects.hpp"
#include "core/replica/peer_wire.hpp"
#include "core/replica/remote_bookings.hpp"

namespace {

constexpr std::size_t max_peers = 4;
constexpr std::size_t max_bookings = 64;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace std::chrono_literals;
  kvr::remote_bookings remote({"w0", "w1", "w2"}, {.block_size = 16, .track_active_blocks = (size & 1) != 0,
                                                   .peer_timeout = 3s, .max_request_age = 60s,
                                                   .max_peers = max_peers, .max_bookings_per_peer = max_bookings});
  kvr::time_point now{};
  std::span<const std::uint8_t> rest(data, size);
  while (rest.size() >= 3) {
    const std::size_t length = std::min<std::size_t>(rest.size() - 3, (std::size_t{rest[0]} << 8) | rest[1]);
    const auto payload = rest.subspan(2, length);
    now += std::chrono::milliseconds(rest[2 + length] * 20);
    rest = rest.subspan(3 + length);

    const auto message = kvr::decode_peer_message(payload);
    if (!message) {
      if (message.error().empty()) std::abort();
      continue;
    }
    // What decodes encodes back to the same message.
    const std::string again = std::visit([](const auto& m) { return kvr::encode_peer_message(m); }, *message);
    const auto reread = kvr::decode_peer_message(std::span(reinterpret_cast<const std::uint8_t*>(again.data()), again.size()));
    if (!reread || *reread != *message) std::abort();
    std::visit([&](const auto& m) { remote.apply(m, now); }, *message);
    remote.expire(now);

    if (remote.peers(now).size() > max_peers) std::abort();
    std::uint64_t requests = 0;
    for (kvr::worker_id w = 0; w < 3; ++w) requests += remote.load(w).requests;
    if (requests > max_peers * max_bookings) std::abort();
    for (const kvr::peer_view& p : remote.peers(now))
      if (p.bookings > max_bookings) std::abort();
  }
  // Silence drops every peer and every booking with them.
  remote.expire(now + 4s);
  if (!remote.empty()) std::abort();
  for (kvr::worker_id w = 0; w < 3; ++w)
    if (remote.load(w) != kvr::worker_load{}) std::abort();

  // Subjects: whatever a set is called, its subject parses back to its token.
  const std::string_view name(reinterpret_cast<const char*>(data), std::min<std::size_t>(size, 64));
  const auto parsed = kvr::parse_peer_subject("kvrouter", kvr::peer_subject("kvrouter", name, kvr::peer_channel::snapshot));
  if (!parsed || parsed->set_token != kvr::subject_token(name) || parsed->channel != kvr::peer_channel::snapshot) std::abort();
  return 0;
}
