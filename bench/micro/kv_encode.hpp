#pragma once
/// Encodes KV events as vLLM ~0.13-0.23 publishes them (array form, `[ts, events, dp_rank]`),
/// for benchmarks that need realistic payloads.

#include <cstdint>
#include <string_view>
#include <vector>

#include <msgpack.hpp>

#include "core/kv_event.hpp"

namespace kvr::bench {

inline std::vector<std::uint8_t> encode_batch(const std::vector<kv_event>& events) {
  msgpack::sbuffer buffer;
  msgpack::packer<msgpack::sbuffer> pk(buffer);
  pk.pack_array(3);
  pk.pack_double(1.5);
  pk.pack_array(static_cast<std::uint32_t>(events.size()));
  for (const kv_event& event : events) {
    if (const auto* s = std::get_if<kv_stored>(&event)) {
      pk.pack_array(12);
      pk.pack(std::string_view("BlockStored"));
      pk.pack(s->block_hashes);
      if (s->parent_block_hash) pk.pack(*s->parent_block_hash);
      else pk.pack_nil();
      pk.pack(s->token_ids);
      pk.pack(s->block_size);
      pk.pack_nil();
      pk.pack(std::string_view("GPU"));
      pk.pack_nil();
      pk.pack_array(static_cast<std::uint32_t>(s->block_hashes.size()));
      for (std::size_t i = 0; i < s->block_hashes.size(); ++i) pk.pack_nil();
      pk.pack(0);
      pk.pack(std::string_view("full_attention"));
      pk.pack_nil();
    } else if (const auto* r = std::get_if<kv_removed>(&event)) {
      pk.pack_array(4);
      pk.pack(std::string_view("BlockRemoved"));
      pk.pack(r->block_hashes);
      pk.pack(std::string_view("GPU"));
      pk.pack(0);
    } else {
      pk.pack_array(1);
      pk.pack(std::string_view("AllBlocksCleared"));
    }
  }
  pk.pack(0);
  const auto* data = reinterpret_cast<const std::uint8_t*>(buffer.data());
  return {data, data + buffer.size()};
}

}  // namespace kvr::bench
