#pragma once
/// Deterministic traffic-shaped inputs shared by the micro benchmarks.

#include <cstdint>
#include <random>
#include <vector>

#include "core/kv/block_hash.hpp"
#include "core/kv/kv_event.hpp"

namespace kvr::bench {

/// `count` token ids in the range of a real 150k vocabulary.
inline std::vector<std::uint32_t> random_tokens(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint32_t> tokens(count);
  for (auto& t : tokens) t = static_cast<std::uint32_t>(rng() % 151000);
  return tokens;
}

/// Sequence hashes of a token prompt.
inline std::vector<std::uint64_t> sequence_hashes_of(const std::vector<std::uint32_t>& tokens, std::uint32_t block_size) {
  std::vector<std::uint64_t> local;
  std::vector<std::uint64_t> sequence;
  compute_local_hashes(tokens, block_size, {}, {}, local);
  compute_sequence_hashes(local, sequence);
  return sequence;
}

/// A stored event for blocks [first, first + count) of `tokens`, engine hashes derived from
/// the worker and position (parent linkage as an engine would send it).
inline kv_stored stored_event(const std::vector<std::uint32_t>& tokens, std::uint32_t block_size, std::size_t first,
                              std::size_t count, std::uint64_t engine_salt) {
  kv_stored event;
  event.block_size = block_size;
  for (std::size_t b = first; b < first + count; ++b) event.block_hashes.push_back(engine_salt * 1000003 + b + 1);
  if (first > 0) event.parent_block_hash = engine_salt * 1000003 + first;
  event.token_ids.assign(tokens.begin() + static_cast<std::ptrdiff_t>(first * block_size),
                         tokens.begin() + static_cast<std::ptrdiff_t>((first + count) * block_size));
  return event;
}

}  // namespace kvr::bench
