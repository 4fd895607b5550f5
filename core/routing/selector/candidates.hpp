#pragma once
/// Turns the index's per-publisher overlaps and the booked loads into the selector's
/// candidates: one per routable worker.

#include <cstdint>
#include <span>
#include <vector>

#include "core/routing/active_sequences.hpp"
#include "core/routing/selector/cost.hpp"

namespace kvr {

/// Per worker, the longest overlap among its publishers (a data-parallel worker publishes one
/// stream per rank; its best rank serves the prompt). `publisher_worker[p]` names p's worker.
void overlaps_by_worker(std::span<const std::uint32_t> publisher_overlaps, std::span<const std::uint32_t> publisher_worker,
                        std::size_t workers, std::vector<std::uint32_t>& out);

/// Workers that are healthy (`healthy[w] != 0`) and not excluded, with their overlap (0 if
/// unknown), load, and the prompt's blocks their in-flight requests hold (`active_overlaps`,
/// empty = none).
void collect_candidates(std::span<const std::uint32_t> worker_overlaps, std::span<const worker_load> loads,
                        std::span<const std::uint8_t> healthy, std::span<const std::uint32_t> excluded,
                        std::vector<worker_candidate>& out, std::span<const std::uint32_t> active_overlaps = {});

}  // namespace kvr
