#pragma once
/// Builders shared by the prefix-index tests: token blocks, stored events, request hashes.

#include <cstdint>
#include <optional>
#include <vector>

#include "core/kv/block_hash.hpp"
#include "core/kv/kv_event.hpp"

namespace kvr::testing {

inline constexpr std::uint32_t test_block_size = 4;

/// Tokens of blocks whose contents are given by one id each: block with id k = {k, k+1, k+2, k+3}.
inline std::vector<std::uint32_t> tokens_of(const std::vector<std::uint32_t>& block_ids) {
  std::vector<std::uint32_t> tokens;
  for (std::uint32_t id : block_ids)
    for (std::uint32_t t = 0; t < test_block_size; ++t) tokens.push_back(id + t);
  return tokens;
}

/// A stored event of blocks `block_ids` with engine hashes `engine_hashes`.
inline kv_stored make_stored(std::vector<std::uint64_t> engine_hashes, std::optional<std::uint64_t> parent,
                             const std::vector<std::uint32_t>& block_ids) {
  kv_stored event;
  event.block_hashes = std::move(engine_hashes);
  event.parent_block_hash = parent;
  event.token_ids = tokens_of(block_ids);
  event.block_size = test_block_size;
  return event;
}

/// The sequence hashes a request made of these blocks would carry.
inline std::vector<std::uint64_t> request_hashes(const std::vector<std::uint32_t>& block_ids) {
  std::vector<std::uint64_t> local;
  std::vector<std::uint64_t> sequence;
  compute_local_hashes(tokens_of(block_ids), test_block_size, {}, {}, local);
  compute_sequence_hashes(local, sequence);
  return sequence;
}

/// A batch storing blocks `block_ids` as one chain starting at the sequence's start (engine
/// hash of block b: 1000 + b).
inline kv_batch stored_batch(const std::vector<std::uint32_t>& block_ids) {
  std::vector<std::uint64_t> engine_hashes;
  for (std::uint32_t id : block_ids) engine_hashes.push_back(1000 + id);
  kv_batch batch;
  batch.events.emplace_back(make_stored(engine_hashes, std::nullopt, block_ids));
  return batch;
}

}  // namespace kvr::testing
