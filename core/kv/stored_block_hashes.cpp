#include "core/kv/stored_block_hashes.hpp"

#include <algorithm>
#include <span>

#include "core/kv/block_hash.hpp"

namespace kvr {

void compute_stored_local_hashes(const kv_stored& event, std::vector<std::uint64_t>& out) {
  out.clear();
  const std::size_t blocks = event.block_hashes.size();
  if (event.block_size == 0 || event.token_ids.size() != blocks * event.block_size) return;
  out.reserve(blocks);
  const std::uint64_t seed = block_seed(event.lora_name);
  // The salt seeds the first block of a sequence only: an event with a parent continues one.
  const std::uint64_t first_seed =
      !event.parent_block_hash && !event.cache_salt.empty() ? block_seed(event.lora_name, event.cache_salt) : seed;
  const std::span<const std::uint32_t> tokens(event.token_ids);
  // Images by (block, hash), sorted once: a block's images are then a run of them, so an event
  // with many blocks and many images costs a sort, not blocks x images. Only events with
  // images pay for this.
  std::vector<std::pair<std::uint32_t, std::uint64_t>> by_block;
  by_block.reserve(event.images.size());
  for (const block_image_hash& image : event.images) by_block.emplace_back(image.block, image.hash);
  std::sort(by_block.begin(), by_block.end());
  std::vector<std::uint64_t> images;
  std::size_t next = 0;
  for (std::size_t b = 0; b < blocks; ++b) {
    images.clear();
    for (; next < by_block.size() && by_block[next].first == b; ++next) images.push_back(by_block[next].second);
    out.push_back(local_block_hash(tokens.subspan(b * event.block_size, event.block_size), images, b == 0 ? first_seed : seed));
  }
}

void precompute_local_hashes(kv_batch& batch) {
  for (kv_event& event : batch.events)
    // A mamba group's blocks may span several of the index's: they keep their ids, which the
    // scorer hashes at the index's block size (core/routing/kv_groups).
    if (auto* stored = std::get_if<kv_stored>(&event);
        stored != nullptr && is_gpu_tier(stored->medium) && kv_group_kind_of(stored->kv_cache_spec_kind) != kv_group_kind::mamba)
      compute_stored_local_hashes(*stored, stored->local_hashes);
}

void release_hashed_token_ids(kv_batch& batch) {
  for (kv_event& event : batch.events)
    if (auto* stored = std::get_if<kv_stored>(&event); stored != nullptr && !stored->local_hashes.empty())
      std::vector<std::uint32_t>().swap(stored->token_ids);
}

}  // namespace kvr
