#pragma once
/// Block hashing: tokens (+ image hashes, LoRA name, cache salt) -> per-block local hashes ->
/// chained sequence hashes. The formula follows NVIDIA Dynamo's kv-router so that indexes built
/// by either are comparable (docs/architecture.md §4).

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace kvr {

/// Seed of every XXH3-64 call in block hashing.
inline constexpr std::uint64_t block_hash_seed = 1337;

/// One image's placeholder run inside a token sequence, with the image's 64-bit hash.
struct image_span {
  std::size_t token_offset = 0;  ///< position of the first placeholder token
  std::size_t token_count = 0;   ///< number of placeholder tokens
  std::uint64_t hash = 0;        ///< XXH3-64 of the image (see core/media)
};

/// What, besides the token ids, distinguishes one cached block from another.
///
/// - `lora_name`: the adapter changes every block's seed to XXH3-64(lora_name, seed 1337),
///   because engines report the LoRA name on every block (`extra_keys`).
/// - `cache_salt`: changes block 0's seed only, to XXH3-64(cache_salt, <LoRA-dependent seed>);
///   engines report the salt on the first block of a sequence only, and the chained sequence
///   hash carries it into every later block.
struct block_hash_options {
  std::string_view lora_name;
  std::string_view cache_salt;
};

/// The seed for a block, given the LoRA name (empty = none) and, for block 0, the cache salt
/// (empty = none).
[[nodiscard]] std::uint64_t block_seed(std::string_view lora_name, std::string_view cache_salt = {});

/// Local hash of one full block: XXH3-64(seed) over the token ids as little-endian u32, followed
/// by `sorted_image_hashes` (ascending) as little-endian u64.
[[nodiscard]] std::uint64_t local_block_hash(std::span<const std::uint32_t> block_tokens,
                                             std::span<const std::uint64_t> sorted_image_hashes,
                                             std::uint64_t seed);

/// Chains one block onto its parent: XXH3-64(seed 1337) of (parent_seq ‖ local) as LE u64s.
[[nodiscard]] std::uint64_t chain_sequence_hash(std::uint64_t parent_seq_hash, std::uint64_t local_hash);

/// Local hashes of every full block of `tokens` (a partial last block is not hashed), written
/// into `out` (cleared first). `images` need not be sorted; each image's hash is mixed into every
/// block its placeholder run overlaps.
void compute_local_hashes(std::span<const std::uint32_t> tokens, std::uint32_t block_size,
                          std::span<const image_span> images, const block_hash_options& options,
                          std::vector<std::uint64_t>& out);

/// Sequence hashes from local hashes: seq[0] = local[0], seq[i] = chain(seq[i-1], local[i]).
/// Written into `out` (cleared first).
void compute_sequence_hashes(std::span<const std::uint64_t> local_hashes, std::vector<std::uint64_t>& out);

/// Continues a chain: seq[i] = chain(seq[i-1], local[i]) with seq[-1] = `parent_seq_hash`.
/// Appends to `out`.
void extend_sequence_hashes(std::uint64_t parent_seq_hash, std::span<const std::uint64_t> local_hashes,
                            std::vector<std::uint64_t>& out);

}  // namespace kvr
