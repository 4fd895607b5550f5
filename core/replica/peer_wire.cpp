#include "core/replica/peer_wire.hpp"

#include <limits>
#include <optional>

#include <fmt/format.h>
#include <msgpack.hpp>

#include "core/kv/msgpack_view.hpp"

namespace kvr {
namespace {

using packer = msgpack::packer<msgpack::sbuffer>;

enum class message_kind : std::uint8_t { bookings = 0, snapshot = 1 };

void pack_string(packer& pk, const std::string& s) {
  pk.pack_str(static_cast<std::uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
}

void pack_origin(packer& pk, message_kind kind, const peer_origin& origin) {
  pk.pack_uint64(peer_wire_version);
  pk.pack_uint8(static_cast<std::uint8_t>(kind));
  pack_string(pk, origin.replica);
  pk.pack_uint64(origin.incarnation);
  pk.pack_uint64(origin.sequence);
  pk.pack_int64(origin.sent_unix_ns);
}

void pack_event(packer& pk, const peer_event& event) {
  if (event.what != peer_event::kind::booked) {
    pk.pack_array(2);
    pk.pack_uint8(static_cast<std::uint8_t>(event.what));
    pk.pack_uint64(event.request_id);
    return;
  }
  pk.pack_array(6);
  pk.pack_uint8(static_cast<std::uint8_t>(event.what));
  pk.pack_uint64(event.request_id);
  pack_string(pk, event.worker);
  pk.pack_uint32(event.prompt_tokens);
  pk.pack_uint32(event.overlap_blocks);
  pk.pack_array(static_cast<std::uint32_t>(event.sequence_hashes.size()));
  for (std::uint64_t h : event.sequence_hashes) pk.pack_uint64(h);
}

// -- decoding --------------------------------------------------------------------------------

/// Reads the fields of one array in order, checking each one's type and range. The first
/// problem sticks: later reads return zero values, and `error()` names it.
class field_reader {
 public:
  field_reader(const mp_ref& array, std::string_view what) : elements_(array), what_(what) {}

  [[nodiscard]] const std::optional<std::string>& error() const { return error_; }

  std::uint64_t uint(std::string_view field, std::uint64_t max = UINT64_MAX) {
    const auto value = next(field);
    if (!value) return 0;
    if (value->type() != mp_kind::uint || value->uint_value() > max)
      return fail(fmt::format("{} must be an unsigned integer up to {}", field, max)), 0;
    return value->uint_value();
  }
  std::uint32_t u32(std::string_view field, std::uint32_t max = UINT32_MAX) {
    return static_cast<std::uint32_t>(uint(field, max));
  }
  std::int64_t sint(std::string_view field) {
    const auto value = next(field);
    if (!value) return 0;
    if (value->type() == mp_kind::sint) return value->int_value();
    if (value->type() == mp_kind::uint && value->uint_value() <= std::uint64_t(std::numeric_limits<std::int64_t>::max()))
      return static_cast<std::int64_t>(value->uint_value());
    return fail(fmt::format("{} must be a 64-bit integer", field)), 0;
  }
  std::string string(std::string_view field, std::size_t max_bytes) {
    const auto value = next(field);
    if (!value) return {};
    if (!value->is_str() || value->size() == 0 || value->size() > max_bytes)
      return fail(fmt::format("{} must be a string of 1 to {} bytes", field, max_bytes)), std::string();
    return std::string(value->str());
  }
  bool boolean(std::string_view field) {
    const auto value = next(field);
    if (!value) return false;
    if (value->type() != mp_kind::boolean) return fail(fmt::format("{} must be a boolean", field)), false;
    return value->bool_value();
  }
  /// An array's elements (none after an error).
  std::optional<mp_elements> array(std::string_view field) {
    const auto value = next(field);
    if (!value) return std::nullopt;
    if (!value->is_array()) return fail(fmt::format("{} must be an array", field)), std::nullopt;
    return mp_elements(*value);
  }
  /// Elements an array declares (for reservations: each is at least one byte of the payload).
  std::vector<std::uint64_t> uints(std::string_view field) {
    std::vector<std::uint64_t> out;
    auto items = array(field);
    if (!items) return out;
    while (!items->done()) {
      const auto value = items->next_uint();
      if (!value) return fail(fmt::format("{} must hold unsigned integers", field)), std::vector<std::uint64_t>();
      out.push_back(*value);
    }
    return out;
  }
  void fail(std::string message) {
    if (!error_) error_ = fmt::format("{}: {}", what_, message);
  }

 private:
  std::optional<mp_ref> next(std::string_view field) {
    if (error_) return std::nullopt;
    if (elements_.done()) return fail(fmt::format("{} is missing", field)), std::nullopt;
    return elements_.next();
  }

  mp_elements elements_;
  std::string_view what_;
  std::optional<std::string> error_;
};

using decode_error = std::unexpected<std::string>;

peer_origin read_origin(field_reader& fields) {
  peer_origin origin;
  origin.replica = fields.string("replica", peer_wire_limits::max_replica_bytes);
  origin.incarnation = fields.uint("incarnation");
  origin.sequence = fields.uint("sequence");
  origin.sent_unix_ns = fields.sint("sent_unix_ns");
  return origin;
}

std::expected<peer_event, std::string> read_event(const mp_ref& value) {
  if (!value.is_array()) return decode_error("bookings: an event must be an array");
  field_reader fields(value, "booking event");
  peer_event event;
  event.what = static_cast<peer_event::kind>(fields.uint("kind", 2));
  event.request_id = fields.uint("request_id");
  if (event.what == peer_event::kind::booked) {
    event.worker = fields.string("worker", peer_wire_limits::max_worker_bytes);
    event.prompt_tokens = fields.u32("prompt_tokens");
    event.overlap_blocks = fields.u32("overlap_blocks");
    event.sequence_hashes = fields.uints("sequence_hashes");
  }
  if (fields.error()) return decode_error(*fields.error());
  return event;
}

std::expected<peer_snapshot_entry, std::string> read_entry(const mp_ref& value) {
  if (!value.is_array()) return decode_error("snapshot: a booking must be an array");
  field_reader fields(value, "snapshot booking");
  peer_snapshot_entry entry;
  entry.request_id = fields.uint("request_id");
  entry.worker = fields.string("worker", peer_wire_limits::max_worker_bytes);
  entry.prompt_tokens = fields.u32("prompt_tokens");
  entry.overlap_blocks = fields.u32("overlap_blocks");
  entry.prefilled = fields.boolean("prefilled");
  if (fields.error()) return decode_error(*fields.error());
  return entry;
}

/// Reads every element of `items` with `read` into `out`.
template <class T, class Read>
std::expected<void, std::string> read_all(mp_elements items, std::vector<T>& out, Read read) {
  while (!items.done()) {
    auto item = read(items.next());
    if (!item) return decode_error(item.error());
    out.push_back(std::move(*item));
  }
  return {};
}

std::expected<peer_message, std::string> read_bookings(field_reader& fields, peer_origin origin) {
  peer_bookings_message message{.origin = std::move(origin), .events = {}};
  const auto events = fields.array("events");
  if (fields.error()) return decode_error(*fields.error());
  if (auto read = read_all(*events, message.events, read_event); !read) return decode_error(read.error());
  return message;
}

std::expected<peer_message, std::string> read_snapshot(field_reader& fields, peer_origin origin) {
  peer_snapshot_message message{.origin = std::move(origin)};
  message.part = fields.u32("part", peer_wire_limits::max_parts - 1);
  message.parts = fields.u32("parts", peer_wire_limits::max_parts);
  if (!fields.error() && (message.parts == 0 || message.part >= message.parts))
    fields.fail(fmt::format("part {} of {} is out of range", message.part, message.parts));
  if (!fields.error() && message.origin.sequence < message.part) fields.fail("sequence is below its part number");
  const auto bookings = fields.array("bookings");
  if (fields.error()) return decode_error(*fields.error());
  if (auto read = read_all(*bookings, message.bookings, read_entry); !read) return decode_error(read.error());
  return message;
}

}  // namespace

std::string encode_peer_message(const peer_bookings_message& message) {
  msgpack::sbuffer buffer;
  packer pk(buffer);
  pk.pack_array(7);
  pack_origin(pk, message_kind::bookings, message.origin);
  pk.pack_array(static_cast<std::uint32_t>(message.events.size()));
  for (const peer_event& event : message.events) pack_event(pk, event);
  return {buffer.data(), buffer.size()};
}

std::string encode_peer_message(const peer_snapshot_message& message) {
  msgpack::sbuffer buffer;
  packer pk(buffer);
  pk.pack_array(9);
  pack_origin(pk, message_kind::snapshot, message.origin);
  pk.pack_uint32(message.part);
  pk.pack_uint32(message.parts);
  pk.pack_array(static_cast<std::uint32_t>(message.bookings.size()));
  for (const peer_snapshot_entry& entry : message.bookings) {
    pk.pack_array(5);
    pk.pack_uint64(entry.request_id);
    pack_string(pk, entry.worker);
    pk.pack_uint32(entry.prompt_tokens);
    pk.pack_uint32(entry.overlap_blocks);
    if (entry.prefilled) pk.pack_true();
    else pk.pack_false();
  }
  return {buffer.data(), buffer.size()};
}

std::expected<peer_message, std::string> decode_peer_message(std::span<const std::uint8_t> payload) {
  if (payload.size() > peer_wire_limits::max_payload_bytes)
    return decode_error(fmt::format("peer message of {} bytes is over the limit of {}", payload.size(),
                                    peer_wire_limits::max_payload_bytes));
  const auto root = mp_parse(payload, 5);
  if (!root) return decode_error(fmt::format("peer message is not msgpack: {}", to_string(root.error())));
  if (!root->is_array()) return decode_error("peer message must be an array");
  field_reader fields(*root, "peer message");
  const std::uint64_t version = fields.uint("version");
  if (!fields.error() && version != peer_wire_version)
    return decode_error(fmt::format("peer message version {} is not {} (a replica of another kvrouter release?)", version,
                                    peer_wire_version));
  const auto kind = static_cast<message_kind>(fields.uint("kind", 1));
  peer_origin origin = read_origin(fields);
  if (fields.error()) return decode_error(*fields.error());
  if (kind == message_kind::bookings) return read_bookings(fields, std::move(origin));
  return read_snapshot(fields, std::move(origin));
}

}  // namespace kvr
