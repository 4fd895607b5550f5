#include "core/kv/block_hash.hpp"

#include <algorithm>
#include <array>
#include <bit>

// Inlined: the chain hash hashes 16 bytes per block, where a call costs as much as the hash.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kvr {

static_assert(std::endian::native == std::endian::little,
              "block hashes are defined over little-endian bytes; add byte swapping for big-endian hosts");

std::uint64_t block_seed(std::string_view lora_name, std::string_view cache_salt) {
  std::uint64_t seed = block_hash_seed;
  if (!lora_name.empty()) seed = XXH3_64bits_withSeed(lora_name.data(), lora_name.size(), block_hash_seed);
  if (!cache_salt.empty()) seed = XXH3_64bits_withSeed(cache_salt.data(), cache_salt.size(), seed);
  return seed;
}

std::uint64_t local_block_hash(std::span<const std::uint32_t> block_tokens,
                               std::span<const std::uint64_t> sorted_image_hashes, std::uint64_t seed) {
  if (sorted_image_hashes.empty())
    return XXH3_64bits_withSeed(block_tokens.data(), block_tokens.size_bytes(), seed);
  XXH3_state_t state{};
  XXH3_64bits_reset_withSeed(&state, seed);
  XXH3_64bits_update(&state, block_tokens.data(), block_tokens.size_bytes());
  XXH3_64bits_update(&state, sorted_image_hashes.data(), sorted_image_hashes.size_bytes());
  return XXH3_64bits_digest(&state);
}

std::uint64_t chain_sequence_hash(std::uint64_t parent_seq_hash, std::uint64_t local_hash) {
  const std::array<std::uint64_t, 2> pair{parent_seq_hash, local_hash};
  return XXH3_64bits_withSeed(pair.data(), sizeof(pair), block_hash_seed);
}

void compute_local_hashes(std::span<const std::uint32_t> tokens, std::uint32_t block_size,
                          std::span<const image_span> images, const block_hash_options& options,
                          std::vector<std::uint64_t>& out) {
  out.clear();
  if (block_size == 0) return;
  const std::size_t full_blocks = tokens.size() / block_size;
  out.reserve(full_blocks);
  const std::uint64_t seed = block_seed(options.lora_name);
  const std::uint64_t first_seed = options.cache_salt.empty() ? seed : block_seed(options.lora_name, options.cache_salt);

  if (images.empty()) {
    for (std::size_t b = 0; b < full_blocks; ++b)
      out.push_back(local_block_hash(tokens.subspan(b * block_size, block_size), {}, b == 0 ? first_seed : seed));
    return;
  }
  std::vector<std::uint64_t> block_images;  // only multimodal requests pay for this
  for (std::size_t b = 0; b < full_blocks; ++b) {
    const std::size_t begin = b * block_size;
    const std::size_t end = begin + block_size;
    block_images.clear();
    for (const image_span& image : images) {
      const std::size_t image_end = image.token_offset + image.token_count;
      if (image.token_count > 0 && image.token_offset < end && image_end > begin) block_images.push_back(image.hash);
    }
    std::sort(block_images.begin(), block_images.end());
    out.push_back(local_block_hash(tokens.subspan(begin, block_size), block_images, b == 0 ? first_seed : seed));
  }
}

void extend_sequence_hashes(std::uint64_t parent_seq_hash, std::span<const std::uint64_t> local_hashes,
                            std::vector<std::uint64_t>& out) {
  std::uint64_t previous = parent_seq_hash;
  for (std::uint64_t local : local_hashes) {
    previous = chain_sequence_hash(previous, local);
    out.push_back(previous);
  }
}

void compute_sequence_hashes(std::span<const std::uint64_t> local_hashes, std::vector<std::uint64_t>& out) {
  out.clear();
  if (local_hashes.empty()) return;
  out.reserve(local_hashes.size());
  out.push_back(local_hashes.front());
  extend_sequence_hashes(local_hashes.front(), local_hashes.subspan(1), out);
}

}  // namespace kvr
