#include "core/kv/kv_apply.hpp"

#include <algorithm>
#include <span>

#include <nlohmann/json.hpp>

namespace kvr {

namespace {

/// Events prefetched at a time: enough for their cache misses to overlap, few enough that the
/// loads they start fit the core's miss buffers (a decode step of 64 events issued 128 at once).
constexpr std::size_t prefetch_group = 16;

struct apply_targets {
  kv_groups* groups;
  kv_tiers* tiers;
  time_point now;
};

void apply_stored_event(prefix_index& index, worker_id worker, const kv_stored& stored, kv_event_counters& counters,
                        const apply_targets& to) {
  kv_groups* groups = to.groups;
  if (!is_gpu_tier(stored.medium)) {
    ++counters.other_tier_events;
    if (to.tiers != nullptr && fills_its_blocks(stored)) (void)to.tiers->apply_stored(worker, stored, index, to.now);
  } else if (!fills_its_blocks(stored)) {
    ++counters.partial_blocks;
  } else if (joins_the_full_attention_chain(stored)) {
    if (groups != nullptr && stored.group_idx) groups->note_group(*stored.group_idx, kv_group_kind::full_attention);
    if (!index.apply_stored(worker, stored)) ++counters.dropped_stored;
  } else if (kv_group_kind_of(stored.kv_cache_spec_kind) == kv_group_kind::unknown) {
    ++counters.unknown_group_kind_events;
    if (groups != nullptr && stored.group_idx) groups->note_group(*stored.group_idx, kv_group_kind::unknown);
  } else {
    ++counters.other_group_events;
    if (groups == nullptr || groups->apply_stored(worker, stored, index) != group_store_outcome::applied)
      ++counters.dropped_stored;
  }
}

void apply_event(prefix_index& index, worker_id worker, const kv_event& event, kv_event_counters& counters,
                 const apply_targets& to) {
  kv_groups* groups = to.groups;
  if (const auto* stored = std::get_if<kv_stored>(&event)) {
    ++counters.stored_events;
    apply_stored_event(index, worker, *stored, counters, to);
  } else if (const auto* removed = std::get_if<kv_removed>(&event)) {
    ++counters.removed_events;
    if (!is_gpu_tier(removed->medium)) {
      ++counters.other_tier_events;
      if (to.tiers != nullptr) to.tiers->apply_removed(worker, *removed);
    } else if (groups != nullptr && groups->owns_removal(*removed)) {
      ++counters.other_group_events;
      groups->apply_removed(worker, *removed);
    } else {
      index.apply_removed(worker, *removed);
    }
  } else {
    ++counters.cleared_events;
    index.apply_cleared(worker);
    if (groups != nullptr) groups->clear(worker);
    if (to.tiers != nullptr) to.tiers->clear(worker);
  }
}

}  // namespace

void apply_batch(prefix_index& index, worker_id worker, const kv_batch& batch, kv_event_counters& counters,
                 kv_groups* groups, kv_tiers* tiers, time_point now) {
  const apply_targets to{groups, tiers, now};
  ++counters.batches;
  counters.unknown_events += batch.unknown_events;
  counters.malformed_events += batch.malformed_events;
  const std::span<const kv_event> events(batch.events);
  for (std::size_t first = 0; first < events.size(); first += prefetch_group) {
    const auto group = events.subspan(first, std::min(prefetch_group, events.size() - first));
    index.prefetch(worker, group);
    for (const kv_event& event : group) apply_event(index, worker, event, counters, to);
  }
}

nlohmann::json to_json(const kv_event_counters& c) {
  return {{"batches", c.batches},
          {"stored_events", c.stored_events},
          {"removed_events", c.removed_events},
          {"cleared_events", c.cleared_events},
          {"unknown_events", c.unknown_events},
          {"malformed_events", c.malformed_events},
          {"other_tier_events", c.other_tier_events},
          {"partial_blocks", c.partial_blocks},
          {"dropped_stored", c.dropped_stored},
          {"other_group_events", c.other_group_events},
          {"unknown_group_kind_events", c.unknown_group_kind_events}};
}

nlohmann::json to_json(const index_counters& c) {
  return {{"stored_blocks", c.stored_blocks},       {"removed_blocks", c.removed_blocks},
          {"cleared", c.cleared},                   {"unknown_parent", c.unknown_parent},
          {"unknown_removed", c.unknown_removed},   {"malformed_stored", c.malformed_stored},
          {"evicted_entries", c.evicted_entries},   {"predicted_blocks", c.predicted_blocks},
          {"expired_blocks", c.expired_blocks}};
}

nlohmann::json to_json(const kv_groups& groups) {
  static constexpr const char* kind_names[] = {"full_attention", "sliding_window", "mamba", "unknown"};
  nlohmann::json listed = nlohmann::json::array();
  for (const kv_group_info& g : groups.groups())
    listed.push_back({{"group_idx", g.group_idx},
                      {"kind", kind_names[static_cast<int>(g.kind)]},
                      {"window_tokens", g.window_tokens},
                      {"block_size", g.block_size},
                      {"blocks", g.blocks}});
  const kv_group_counters& c = groups.counters();
  return {{"groups", std::move(listed)},
          {"counters",
           {{"stored_blocks", c.stored_blocks},
            {"removed_blocks", c.removed_blocks},
            {"unknown_kind_events", c.unknown_kind_events},
            {"unknown_parent", c.unknown_parent},
            {"foreign_block_size", c.foreign_block_size},
            {"over_bound", c.over_bound}}}};
}

nlohmann::json to_json(const kv_tiers& tiers) {
  const kv_tier_counters& c = tiers.counters();
  return {{"host_blocks", tiers.blocks(kv_tier::host)},
          {"disk_blocks", tiers.blocks(kv_tier::disk)},
          {"external_blocks", tiers.blocks(kv_tier::external)},
          {"counters",
           {{"stored_blocks", c.stored_blocks},
            {"removed_blocks", c.removed_blocks},
            {"unknown_tier_events", c.unknown_tier_events},
            {"unknown_parent", c.unknown_parent},
            {"aged_out", c.aged_out},
            {"pushed_out", c.pushed_out}}}};
}

nlohmann::json dump_index(const prefix_index& index, std::span<const std::string> worker_names) {
  nlohmann::json workers = nlohmann::json::array();
  std::vector<std::uint64_t> hashes;
  for (worker_id w = 0; w < worker_names.size(); ++w) {
    hashes.clear();
    index.collect_worker_blocks(w, hashes);
    std::sort(hashes.begin(), hashes.end());
    nlohmann::json as_text = nlohmann::json::array();  // u64 as strings: JSON readers lose precision
    for (std::uint64_t h : hashes) as_text.push_back(std::to_string(h));
    workers.push_back({{"worker", worker_names[w]}, {"blocks", hashes.size()}, {"sequence_hashes", std::move(as_text)}});
  }
  return {{"total_blocks", index.total_blocks()},
          {"memory_bytes", index.memory_bytes()},
          {"workers", std::move(workers)},
          {"index_counters", to_json(index.counters())}};
}

}  // namespace kvr
