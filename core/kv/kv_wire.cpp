#include "core/kv/kv_wire.hpp"

#include <array>
#include <cstring>
#include <limits>
#include <type_traits>

#include <fmt/format.h>
#include <xxhash.h>

#include "core/kv/kv_wire_common_shape.hpp"

namespace kvr {
namespace {

using kind = mp_kind;

std::unexpected<wire_error> fail(std::string message) { return std::unexpected(wire_error{std::move(message)}); }

std::expected<std::uint64_t, wire_error> read_hash(mp_ref ref, std::string_view field) {
  switch (ref.type()) {
    case kind::uint: return ref.uint_value();
    case kind::sint: return static_cast<std::uint64_t>(ref.int_value());
    case kind::bin:
      if (ref.size() == 0) return fail(fmt::format("{}: empty bin hash", field));
      return fold_hash_bytes(ref.bytes());
    default: return fail(fmt::format("{}: a hash must be an integer or bin", field));
  }
}

std::expected<std::int64_t, wire_error> read_int(mp_ref ref, std::string_view field) {
  if (ref.type() == kind::sint) return ref.int_value();
  if (ref.type() == kind::uint && ref.uint_value() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    return static_cast<std::int64_t>(ref.uint_value());
  return fail(fmt::format("{}: expected an integer", field));
}

std::expected<std::optional<std::int64_t>, wire_error> read_optional_int(mp_ref ref, std::string_view field) {
  if (ref.is_nil()) return std::nullopt;
  auto value = read_int(ref, field);
  if (!value) return std::unexpected(value.error());
  return *value;
}

std::expected<std::string, wire_error> read_optional_str(mp_ref ref, std::string_view field) {
  if (ref.is_nil()) return std::string{};
  if (!ref.is_str()) return fail(fmt::format("{}: expected a string or nil", field));
  return std::string(ref.str());
}

/// Reads an optional field into `out`: nil leaves it empty.
template <class T>
std::expected<void, wire_error> read_into(T& out, mp_ref value, std::string_view field) {
  auto read = [&] {
    if constexpr (std::is_same_v<T, std::string>) return read_optional_str(value, field);
    else return read_optional_int(value, field);
  }();
  if (!read) return std::unexpected(read.error());
  out = std::move(*read);
  return {};
}

/// Reading an array's elements walks to its end, so these readers return the value after it:
/// the caller moves on without skipping the array a second time.
using after_value = std::expected<mp_ref, wire_error>;

after_value read_hashes(mp_ref ref, std::string_view field, std::vector<std::uint64_t>& out) {
  if (!ref.is_array()) return fail(fmt::format("{}: expected an array", field));
  out.reserve(ref.size());
  mp_elements items(ref);
  while (!items.done()) {
    if (auto hash = items.next_uint()) {
      out.push_back(*hash);
      continue;
    }
    auto hash = read_hash(items.next(), field);
    if (!hash) return std::unexpected(hash.error());
    out.push_back(*hash);
  }
  return items.after();
}

/// Token ids: ints, or SGLang EAGLE `[token, next_token]` pairs, of which the first is the
/// token at that position (what the router's own tokenization yields).
after_value read_tokens(mp_ref ref, std::vector<std::uint32_t>& out) {
  if (!ref.is_array()) return fail("token_ids: expected an array");
  mp_elements items(ref);
  // Plain token ids in one tight loop; a pair or a wider integer goes the long way below. The
  // declared length is backed by bytes (mp_parse checked every element is there).
  out.resize(ref.size());
  const std::size_t fast = items.take_u32s(out);
  out.resize(fast);
  for (auto i = static_cast<std::uint32_t>(fast); !items.done(); ++i) {
    std::optional<std::uint64_t> token = items.next_uint();
    if (!token) {
      const mp_ref item = items.next();
      if (item.is_array() && item.size() == 0) return fail("token_ids: empty token pair");
      if (const mp_ref first = item.is_array() ? item.first_child() : item; first.type() == kind::uint)
        token = first.uint_value();
    }
    if (!token || *token > std::numeric_limits<std::uint32_t>::max())
      return fail(fmt::format("token_ids[{}]: expected a token id in 0..2^32-1", i));
    out.push_back(static_cast<std::uint32_t>(*token));
  }
  return items.after();
}

bool is_hex_digest(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return false;
  return true;
}

/// `extra_keys`: per block, nil or an array of: the LoRA name, then images as
/// `[identifier, offset]` pairs (old engines: bare identifiers), then, on a sequence's first
/// block, the cache salt. A bare string is the LoRA name if it equals the event's `lora_name`,
/// an image if it is a 64-hex digest, the cache salt if it is the last key of block 0, and
/// otherwise an image identifier.
///
/// Every image takes at least one token of the sequence, so an event naming more images than it
/// has tokens is malformed (and cannot make the decoded batch outgrow its payload).
std::expected<void, wire_error> read_extra_keys(mp_ref ref, kv_stored& event) {
  if (ref.is_nil()) return {};
  auto add_image = [&event](block_image_hash image) -> std::expected<void, wire_error> {
    if (event.images.size() >= event.token_ids.size()) return fail("extra_keys: more images than tokens");
    event.images.push_back(std::move(image));
    return {};
  };
  if (!ref.is_array()) return fail("extra_keys: expected an array or nil");
  // Engines send a nil per block without keys: most events have nothing else, one byte a block.
  if (mp_elements nils(ref); nils.skip_nils() == ref.size()) return {};
  // Reserved from a count of the keys (headers only), so the images never grow by doubling.
  std::size_t keys = 0;
  for (mp_elements blocks(ref); !blocks.done();) {
    blocks.skip_nils();
    if (blocks.done()) break;
    if (const mp_ref block = blocks.next(); block.is_array()) keys += block.size();
  }
  event.images.reserve(std::min(keys, event.token_ids.size()));
  mp_ref block = ref.first_child();
  for (std::uint32_t b = 0; b < ref.size(); ++b, block = block.next_sibling()) {
    if (block.is_nil()) continue;
    if (!block.is_array()) return fail(fmt::format("extra_keys[{}]: expected an array or nil", b));
    mp_ref key = block.first_child();
    for (std::uint32_t k = 0; k < block.size(); ++k, key = key.next_sibling()) {
      if (key.is_array()) {
        if (key.size() < 1 || !key.first_child().is_str())
          return fail(fmt::format("extra_keys[{}][{}]: an image must be [identifier, offset]", b, k));
        block_image_hash image{.block = b, .hash = 0, .offset = 0, .identifier = std::string(key.first_child().str())};
        if (key.size() >= 2) {
          auto offset = read_int(key.first_child().next_sibling(), "extra_keys image offset");
          if (!offset) return std::unexpected(offset.error());
          image.offset = *offset;
        }
        image.hash = image_hash_of_identifier(image.identifier);
        if (auto added = add_image(std::move(image)); !added) return added;
      } else if (key.is_str()) {
        const std::string_view text = key.str();
        if (text.empty() || (!event.lora_name.empty() && text == event.lora_name)) continue;
        if (!is_hex_digest(text) && b == 0 && k + 1 == block.size()) {
          event.cache_salt = std::string(text);
          continue;
        }
        auto added = add_image({.block = b, .hash = image_hash_of_identifier(text), .offset = 0, .identifier = std::string(text)});
        if (!added) return added;
      }
      // Other key kinds (prompt-embedding digests as bin, future additions) do not affect
      // which blocks match a prompt's tokens; ignored.
    }
  }
  return {};
}

/// BlockStored fields by declaration order (= array position).
enum class stored_field : std::uint8_t {
  block_hashes = 1, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name, extra_keys,
  group_idx, kv_cache_spec_kind, sliding_window, unknown
};

stored_field stored_field_named(std::string_view key) {
  static constexpr std::array<std::pair<std::string_view, stored_field>, 11> names{{
      {"block_hashes", stored_field::block_hashes},
      {"parent_block_hash", stored_field::parent_block_hash},
      {"token_ids", stored_field::token_ids},
      {"block_size", stored_field::block_size},
      {"lora_id", stored_field::lora_id},
      {"medium", stored_field::medium},
      {"lora_name", stored_field::lora_name},
      {"extra_keys", stored_field::extra_keys},
      {"group_idx", stored_field::group_idx},
      {"kv_cache_spec_kind", stored_field::kv_cache_spec_kind},
      {"kv_cache_spec_sliding_window", stored_field::sliding_window},
  }};
  for (auto [name, field] : names)
    if (name == key) return field;
  return stored_field::unknown;
}

/// Reads one BlockStored field and returns the value after it. `extra_keys` are read last
/// (they need `lora_name`), so the caller passes them back through `deferred_extra_keys`.
after_value read_stored_field(stored_field field, mp_ref value, kv_stored& event,
                              std::optional<mp_ref>& deferred_extra_keys) {
  auto then_next = [&value](std::expected<void, wire_error> read) -> after_value {
    if (!read) return std::unexpected(read.error());
    return value.next_sibling();
  };
  switch (field) {
    case stored_field::block_hashes: return read_hashes(value, "block_hashes", event.block_hashes);
    case stored_field::parent_block_hash:
      if (!value.is_nil()) {
        auto parent = read_hash(value, "parent_block_hash");
        if (!parent) return std::unexpected(parent.error());
        event.parent_block_hash = *parent;
      }
      return value.next_sibling();
    case stored_field::token_ids: return read_tokens(value, event.token_ids);
    case stored_field::block_size: {
      auto size = read_int(value, "block_size");
      if (!size) return std::unexpected(size.error());
      if (*size <= 0 || *size > (1 << 20)) return fail(fmt::format("block_size: {} is out of range", *size));
      event.block_size = static_cast<std::uint32_t>(*size);
      return value.next_sibling();
    }
    case stored_field::lora_id: return then_next(read_into(event.lora_id, value, "lora_id"));
    case stored_field::medium: return then_next(read_into(event.medium, value, "medium"));
    case stored_field::lora_name:
      if (value.is_map()) {  // SGLang: a metadata map in this position
        if (auto salt = value.find("cache_salt"); salt && salt->is_str()) event.cache_salt = std::string(salt->str());
        return value.next_sibling();
      }
      return then_next(read_into(event.lora_name, value, "lora_name"));
    case stored_field::extra_keys: deferred_extra_keys = value; return value.next_sibling();
    case stored_field::group_idx: return then_next(read_into(event.group_idx, value, "group_idx"));
    case stored_field::kv_cache_spec_kind:
      return then_next(read_into(event.kv_cache_spec_kind, value, "kv_cache_spec_kind"));
    case stored_field::sliding_window:
      return then_next(read_into(event.sliding_window, value, "kv_cache_spec_sliding_window"));
    case stored_field::unknown: break;
  }
  return value.next_sibling();
}

std::expected<void, wire_error> finish_stored(kv_stored& event, std::optional<mp_ref> extra_keys, bool saw_hashes,
                                              bool saw_tokens, bool saw_block_size) {
  if (!saw_hashes || !saw_tokens || !saw_block_size)
    return fail("BlockStored: block_hashes, token_ids and block_size are required");
  if (extra_keys) {
    auto read = read_extra_keys(*extra_keys, event);
    if (!read) return std::unexpected(read.error());
  }
  return {};
}

/// A decoded event and, when reading it walked to its end, the value after it.
struct read_event_result {
  std::optional<kv_event> event;  ///< nullopt: a tag this router does not know
  std::optional<mp_ref> after;
};
using event_read = std::expected<read_event_result, wire_error>;

event_read read_stored_array(mp_ref event_ref) {
  kv_stored event;
  std::optional<mp_ref> extra_keys;
  if (event_ref.size() < 5) return fail("BlockStored: fewer than 5 elements");
  mp_ref item = event_ref.first_child().next_sibling();
  const std::uint32_t known = std::min<std::uint32_t>(event_ref.size(), static_cast<std::uint32_t>(stored_field::unknown));
  for (std::uint32_t pos = 1; pos < known; ++pos) {
    auto next = read_stored_field(static_cast<stored_field>(pos), item, event, extra_keys);
    if (!next) return std::unexpected(next.error());
    item = *next;
  }
  for (std::uint32_t pos = known; pos < event_ref.size(); ++pos) item = item.next_sibling();  // newer fields
  auto done = finish_stored(event, extra_keys, true, true, true);
  if (!done) return std::unexpected(done.error());
  return read_event_result{std::move(event), item};
}

event_read read_stored_map(mp_ref event_ref) {
  kv_stored event;
  std::optional<mp_ref> extra_keys;
  bool saw_hashes = false, saw_tokens = false, saw_block_size = false;
  mp_ref key = event_ref.first_child();
  for (std::uint32_t pair = 0; pair < event_ref.size(); ++pair) {
    const mp_ref value = key.next_sibling();
    if (!key.is_str()) {
      key = value.next_sibling();
      continue;
    }
    const stored_field field = stored_field_named(key.str());
    saw_hashes |= field == stored_field::block_hashes;
    saw_tokens |= field == stored_field::token_ids;
    saw_block_size |= field == stored_field::block_size;
    auto next = read_stored_field(field, value, event, extra_keys);
    if (!next) return std::unexpected(next.error());
    key = *next;
  }
  auto done = finish_stored(event, extra_keys, saw_hashes, saw_tokens, saw_block_size);
  if (!done) return std::unexpected(done.error());
  return read_event_result{std::move(event), key};
}

std::expected<kv_event, wire_error> read_removed(mp_ref hashes, std::optional<mp_ref> medium, std::optional<mp_ref> group) {
  kv_removed event;
  if (auto read = read_hashes(hashes, "BlockRemoved.block_hashes", event.block_hashes); !read)
    return std::unexpected(read.error());
  if (medium)
    if (auto read = read_into(event.medium, *medium, "BlockRemoved.medium"); !read) return std::unexpected(read.error());
  if (group)
    if (auto read = read_into(event.group_idx, *group, "BlockRemoved.group_idx"); !read) return std::unexpected(read.error());
  return event;
}

/// An unknown tag reads as no event (the caller skips and counts it).
event_read read_event(mp_ref ref) {
  std::string_view tag;
  if (ref.is_array()) {
    if (ref.size() == 0 || !ref.first_child().is_str()) return fail("event: an array event starts with its tag");
    tag = ref.first_child().str();
  } else if (ref.is_map()) {
    auto type = ref.find("type");
    if (!type || !type->is_str()) return fail("event: a map event needs a string \"type\"");
    tag = type->str();
  } else {
    return fail("event: expected an array or a map");
  }

  if (tag == "BlockStored") {
    return ref.is_array() ? read_stored_array(ref) : read_stored_map(ref);
  }
  if (tag == "BlockRemoved") {
    std::expected<kv_event, wire_error> event = fail("BlockRemoved: block_hashes is required");
    if (ref.is_array()) {
      if (ref.size() >= 2) {
        std::optional<mp_ref> medium, group;
        if (ref.size() >= 3) medium = ref.element(2);
        if (ref.size() >= 4) group = ref.element(3);
        event = read_removed(ref.element(1), medium, group);
      }
    } else if (auto hashes = ref.find("block_hashes")) {
      event = read_removed(*hashes, ref.find("medium"), ref.find("group_idx"));
    }
    if (!event) return std::unexpected(event.error());
    return read_event_result{std::move(*event), std::nullopt};
  }
  if (tag == "AllBlocksCleared") return read_event_result{kv_cleared{}, std::nullopt};
  return read_event_result{};
}

}  // namespace

std::uint64_t fold_hash_bytes(std::span<const std::uint8_t> bytes) {
  const std::size_t n = std::min<std::size_t>(bytes.size(), 8);
  std::uint64_t value = 0;
  for (std::uint8_t byte : bytes.last(n)) value = (value << 8) | byte;
  return value;
}

std::uint64_t image_hash_of_identifier(std::string_view identifier) {
  if (is_hex_digest(identifier)) {
    std::uint64_t value = 0;
    for (char c : identifier.substr(0, 16)) {
      const int digit = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
      value = (value << 4) | static_cast<std::uint64_t>(digit);
    }
    return value;
  }
  return XXH3_64bits(identifier.data(), identifier.size());
}

std::expected<void, wire_error> kv_wire_decoder::decode_batch(std::span<const std::uint8_t> payload, kv_batch& out) {
  if (payload.size() <= max_payload_bytes && decode_common_batch(payload, out)) return {};
  return decode_batch_any_shape(payload, out);
}

std::expected<void, wire_error> kv_wire_decoder::decode_batch_any_shape(std::span<const std::uint8_t> payload,
                                                                       kv_batch& out) {
  out = kv_batch{};
  if (payload.size() > max_payload_bytes)
    return fail(fmt::format("payload of {} bytes exceeds the {}-byte limit", payload.size(), max_payload_bytes));
  auto root = mp_parse(payload, max_depth);
  if (!root) return fail(std::string(to_string(root.error())));

  // In the array envelope the rank follows the events, so it is read where the events end
  // (finding it first would walk the events twice).
  std::optional<mp_ref> ts, events, rank;
  bool rank_follows_events = false;
  if (root->is_array()) {
    if (root->size() < 2) return fail("batch: expected [ts, events] or [ts, events, dp_rank]");
    ts = root->first_child();
    events = ts->next_sibling();
    rank_follows_events = root->size() >= 3;
  } else if (root->is_map()) {
    ts = root->find("ts");
    events = root->find("events");
    rank = root->find("data_parallel_rank");
    if (!events) return fail("batch: a map envelope needs \"events\"");
  } else {
    return fail("batch: expected an array or a map envelope");
  }

  if (ts) {
    switch (ts->type()) {
      case kind::f64: out.timestamp = ts->real_value(); break;
      case kind::uint: out.timestamp = static_cast<double>(ts->uint_value()); break;
      case kind::sint: out.timestamp = static_cast<double>(ts->int_value()); break;
      case kind::nil: break;
      default: return fail("batch: ts must be a number");
    }
  }
  if (!events->is_array()) return fail("batch: events must be an array");
  // A declared length is backed by bytes, but not by bytes of events: reserve no more events
  // than the payload could hold.
  out.events.reserve(std::min<std::size_t>(events->size(), payload.size() / min_event_bytes));
  mp_ref event = events->first_child();
  for (std::uint32_t i = 0; i < events->size(); ++i) {
    auto decoded = read_event(event);
    if (!decoded) {  // skip it, keep the rest of the batch
      if (out.malformed_events++ == 0) out.first_error = fmt::format("events[{}]: {}", i, decoded.error().message);
      event = event.next_sibling();
      continue;
    }
    if (decoded->event) out.events.push_back(std::move(*decoded->event));
    else ++out.unknown_events;
    event = decoded->after ? *decoded->after : event.next_sibling();
  }
  if (rank_follows_events) rank = events->size() > 0 ? event : events->next_sibling();
  if (rank) {
    auto dp = read_optional_int(*rank, "batch: dp_rank");
    if (!dp) {
      out = kv_batch{};
      return std::unexpected(dp.error());
    }
    out.dp_rank = *dp;
  }
  return {};
}

std::expected<kv_event, wire_error> kv_wire_decoder::decode_event(std::span<const std::uint8_t> payload) {
  if (payload.size() > max_payload_bytes) return fail("payload exceeds the size limit");
  auto root = mp_parse(payload, max_depth);
  if (!root) return fail(std::string(to_string(root.error())));
  auto decoded = read_event(*root);
  if (!decoded) return std::unexpected(decoded.error());
  if (!decoded->event) return fail("event: unknown tag");
  return std::move(*decoded->event);
}

}  // namespace kvr
