#include "core/kv/kv_encode.hpp"

#include <array>

#include <msgpack.hpp>

namespace kvr {

namespace {

using packer = msgpack::packer<msgpack::sbuffer>;

void pack_hash(packer& pk, std::uint64_t hash, const kv_encode_options& options) {
  if (options.bin_hashes) {
    // A 32-byte digest whose last 8 bytes (big-endian) are the u64; the rest is filler derived
    // from it, so distinct hashes stay distinct digests.
    std::array<unsigned char, 32> digest{};
    for (int i = 0; i < 24; ++i) digest[static_cast<std::size_t>(i)] = static_cast<unsigned char>((hash >> ((i % 8) * 8)) ^ (0x5a + i));
    for (int i = 0; i < 8; ++i) digest[static_cast<std::size_t>(24 + i)] = static_cast<unsigned char>(hash >> (56 - 8 * i));
    pk.pack_bin(32);
    pk.pack_bin_body(reinterpret_cast<const char*>(digest.data()), 32);
  } else if (options.format == kv_event_format::sglang) {
    pk.pack_int64(static_cast<std::int64_t>(hash));
  } else {
    pk.pack_uint64(hash);
  }
}

void pack_hashes(packer& pk, const std::vector<std::uint64_t>& hashes, const kv_encode_options& options) {
  pk.pack_array(static_cast<std::uint32_t>(hashes.size()));
  for (std::uint64_t h : hashes) pack_hash(pk, h, options);
}

void pack_string(packer& pk, std::string_view s) {
  pk.pack_str(static_cast<std::uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
}

std::string_view medium_of(const std::string& medium) { return medium.empty() ? std::string_view("GPU") : medium; }

/// `extra_keys`: per block, nil, or the images on it as `[identifier, offset in block]`.
void pack_extra_keys(packer& pk, const kv_stored& s) {
  pk.pack_array(static_cast<std::uint32_t>(s.block_hashes.size()));
  for (std::uint32_t b = 0; b < s.block_hashes.size(); ++b) {
    std::uint32_t count = 0;
    for (const block_image_hash& image : s.images) count += image.block == b ? 1 : 0;
    if (count == 0) {
      pk.pack_nil();
      continue;
    }
    pk.pack_array(count);
    for (const block_image_hash& image : s.images) {
      if (image.block != b) continue;
      pk.pack_array(2);
      pack_string(pk, image.identifier);
      pk.pack_int64(image.offset);
    }
  }
}

void pack_stored(packer& pk, const kv_stored& s, const kv_encode_options& options) {
  const bool map_form = options.format == kv_event_format::vllm_map;
  if (map_form) {
    // Optional fields equal to their default are omitted, as msgspec's omit_defaults does.
    pk.pack_map(7 + (s.parent_block_hash ? 1 : 0) + (s.images.empty() ? 0 : 1) + (s.sliding_window ? 1 : 0));
    pack_string(pk, "type");
    pack_string(pk, "BlockStored");
    pack_string(pk, "block_hashes");
    pack_hashes(pk, s.block_hashes, options);
    if (s.parent_block_hash) {
      pack_string(pk, "parent_block_hash");
      pack_hash(pk, *s.parent_block_hash, options);
    }
    pack_string(pk, "token_ids");
    pk.pack(s.token_ids);
    pack_string(pk, "block_size");
    pk.pack(s.block_size);
    pack_string(pk, "medium");
    pack_string(pk, medium_of(s.medium));
    pack_string(pk, "group_idx");
    pk.pack(s.group_idx.value_or(0));
    pack_string(pk, "kv_cache_spec_kind");
    pack_string(pk, s.kv_cache_spec_kind.empty() ? std::string_view("full_attention") : s.kv_cache_spec_kind);
    if (s.sliding_window) {
      pack_string(pk, "kv_cache_spec_sliding_window");
      pk.pack(*s.sliding_window);
    }
    if (!s.images.empty()) {
      pack_string(pk, "extra_keys");
      pack_extra_keys(pk, s);
    }
    return;
  }
  const bool sglang = options.format == kv_event_format::sglang;
  pk.pack_array(sglang ? 8 : 12);
  pack_string(pk, "BlockStored");
  pack_hashes(pk, s.block_hashes, options);
  if (s.parent_block_hash) pack_hash(pk, *s.parent_block_hash, options);
  else pk.pack_nil();
  pk.pack(s.token_ids);
  pk.pack(s.block_size);
  pk.pack_nil();  // lora_id
  pack_string(pk, medium_of(s.medium));
  pk.pack_nil();  // lora_name
  if (sglang) return;
  pack_extra_keys(pk, s);
  pk.pack(s.group_idx.value_or(0));
  pack_string(pk, s.kv_cache_spec_kind.empty() ? std::string_view("full_attention") : s.kv_cache_spec_kind);
  if (s.sliding_window) pk.pack(*s.sliding_window);
  else pk.pack_nil();
}

void pack_removed(packer& pk, const kv_removed& r, const kv_encode_options& options) {
  if (options.format == kv_event_format::vllm_map) {
    pk.pack_map(4);
    pack_string(pk, "type");
    pack_string(pk, "BlockRemoved");
    pack_string(pk, "block_hashes");
    pack_hashes(pk, r.block_hashes, options);
    pack_string(pk, "medium");
    pack_string(pk, medium_of(r.medium));
    pack_string(pk, "group_idx");
    pk.pack(r.group_idx.value_or(0));
    return;
  }
  const bool sglang = options.format == kv_event_format::sglang;
  pk.pack_array(sglang ? 3 : 4);
  pack_string(pk, "BlockRemoved");
  pack_hashes(pk, r.block_hashes, options);
  pack_string(pk, medium_of(r.medium));
  if (!sglang) pk.pack(r.group_idx.value_or(0));
}

}  // namespace

std::optional<kv_event_format> parse_kv_event_format(std::string_view name) {
  if (name == "vllm-array") return kv_event_format::vllm_array;
  if (name == "vllm-map") return kv_event_format::vllm_map;
  if (name == "sglang") return kv_event_format::sglang;
  return std::nullopt;
}

std::string_view to_string(kv_event_format format) {
  switch (format) {
    case kv_event_format::vllm_array: return "vllm-array";
    case kv_event_format::vllm_map: return "vllm-map";
    case kv_event_format::sglang: return "sglang";
  }
  return "?";
}

std::vector<std::uint8_t> encode_kv_batch(const kv_batch& batch, const kv_encode_options& options) {
  msgpack::sbuffer buffer;
  packer pk(buffer);
  pk.pack_array(3);
  pk.pack_double(batch.timestamp);
  pk.pack_array(static_cast<std::uint32_t>(batch.events.size()));
  for (const kv_event& event : batch.events) {
    if (const auto* s = std::get_if<kv_stored>(&event)) {
      pack_stored(pk, *s, options);
    } else if (const auto* r = std::get_if<kv_removed>(&event)) {
      pack_removed(pk, *r, options);
    } else if (options.format == kv_event_format::vllm_map) {
      pk.pack_map(1);
      pack_string(pk, "type");
      pack_string(pk, "AllBlocksCleared");
    } else {
      pk.pack_array(1);
      pack_string(pk, "AllBlocksCleared");
    }
  }
  if (batch.dp_rank) pk.pack(*batch.dp_rank);
  else pk.pack_nil();
  const auto* data = reinterpret_cast<const std::uint8_t*>(buffer.data());
  return {data, data + buffer.size()};
}

}  // namespace kvr
