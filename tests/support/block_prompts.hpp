#pragma once
/// A prompt of whole blocks whose tokens say which block they are, and its sequence hashes as
/// the router computes them: what index tests store as events and then match.
#include <cstdint>
#include <vector>

#include "core/kv/block_hash.hpp"

namespace kvr {

/// The tokens of blocks [first, first + count) of `block` tokens each, from `base` on.
inline std::vector<std::uint32_t> tokens_of_blocks(std::uint32_t first, std::uint32_t count, std::uint32_t block,
                                                   std::uint32_t base) {
  std::vector<std::uint32_t> tokens;
  for (std::uint32_t b = first; b < first + count; ++b)
    for (std::uint32_t t = 0; t < block; ++t) tokens.push_back(base + b * 10 + t);
  return tokens;
}

/// The sequence hashes of the prompt of `blocks` such blocks.
inline std::vector<std::uint64_t> prompt_hashes(std::uint32_t blocks, std::uint32_t block, std::uint32_t base) {
  std::vector<std::uint64_t> local, sequence;
  compute_local_hashes(tokens_of_blocks(0, blocks, block, base), block, {}, {}, local);
  compute_sequence_hashes(local, sequence);
  return sequence;
}

}  // namespace kvr
