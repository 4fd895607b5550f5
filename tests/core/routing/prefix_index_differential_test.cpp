// The prefix index against a naive reference model on seeded random event streams: stores
// (with parents, shared prefixes and unknown parents), removals (known and unknown hashes),
// clears and worker removals. After every step batch, overlaps for random prompts and each
// worker's block set must agree.

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "core/routing/prefix_index.hpp"
#include "tests/core/routing/prefix_index_fixtures.hpp"

namespace kvr {
namespace {

using namespace kvr::testing;

/// The obvious model: per worker, engine hash -> sequence hash.
class reference_index {
 public:
  void stored(worker_id w, const std::optional<std::uint64_t>& parent, const std::vector<std::uint64_t>& engine,
              const std::vector<std::uint64_t>& sequence) {
    auto& blocks = workers_[w];
    if (parent && !blocks.contains(*parent)) return;
    for (std::size_t i = 0; i < engine.size(); ++i) blocks[engine[i]] = sequence[i];
  }
  void removed(worker_id w, const std::vector<std::uint64_t>& engine) {
    for (std::uint64_t h : engine) workers_[w].erase(h);
  }
  void cleared(worker_id w) { workers_[w].clear(); }

  [[nodiscard]] std::set<std::uint64_t> blocks_of(worker_id w) const {
    std::set<std::uint64_t> out;
    if (auto it = workers_.find(w); it != workers_.end())
      for (const auto& [engine, sequence] : it->second) out.insert(sequence);
    return out;
  }
  [[nodiscard]] std::uint32_t overlap(worker_id w, const std::vector<std::uint64_t>& prompt) const {
    const auto blocks = blocks_of(w);
    std::uint32_t n = 0;
    while (n < prompt.size() && blocks.contains(prompt[n])) ++n;
    return n;
  }
  [[nodiscard]] std::vector<std::uint64_t> engine_hashes(worker_id w) const {
    std::vector<std::uint64_t> out;
    if (auto it = workers_.find(w); it != workers_.end())
      for (const auto& [engine, sequence] : it->second) out.push_back(engine);
    return out;
  }

 private:
  std::map<worker_id, std::map<std::uint64_t, std::uint64_t>> workers_;
};

/// Documents sharing prefixes: document d copies a random-length prefix of an earlier one.
std::vector<std::vector<std::uint32_t>> make_documents(std::mt19937_64& rng, int count) {
  std::vector<std::vector<std::uint32_t>> docs;
  for (int d = 0; d < count; ++d) {
    std::vector<std::uint32_t> blocks;
    if (!docs.empty() && rng() % 3 != 0) {
      const auto& base = docs[rng() % docs.size()];
      blocks.assign(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(rng() % (base.size() + 1)));
    }
    const std::size_t length = 1 + rng() % 12;
    while (blocks.size() < length) blocks.push_back(static_cast<std::uint32_t>(rng() % 50) * 16);
    docs.push_back(std::move(blocks));
  }
  return docs;
}

/// An engine's block hash: a deterministic function of the worker and the prefix (as real
/// engines chain theirs), different per worker.
std::uint64_t engine_hash(worker_id w, std::uint64_t sequence_hash) {
  return (sequence_hash ^ (0x9E3779B97F4A7C15ull * (w + 1))) * 0xBF58476D1CE4E5B9ull;
}

void run_stream(std::uint64_t seed, std::uint64_t steps) {
  std::mt19937_64 rng(seed);
  const worker_id n_workers = 1 + static_cast<worker_id>(rng() % 70);  // crosses a bitset word
  const auto docs = make_documents(rng, 40);
  prefix_index index(test_block_size, 1u << 30);
  reference_index reference;

  for (std::uint64_t step = 0; step < steps; ++step) {
    const auto w = static_cast<worker_id>(rng() % n_workers);
    const std::uint64_t kind = rng() % 100;
    if (kind < 60) {
      // Store blocks [begin, end) of a document; usually with the parent the worker has.
      const auto& doc = docs[rng() % docs.size()];
      const std::size_t begin = rng() % doc.size();
      const std::size_t end = begin + 1 + rng() % (doc.size() - begin);
      const auto all = request_hashes(doc);
      std::optional<std::uint64_t> parent;
      if (begin > 0) parent = engine_hash(w, all[begin - 1]);
      if (rng() % 20 == 0) parent = 0xDEAD;  // an unknown parent
      std::vector<std::uint64_t> engine, sequence;
      for (std::size_t b = begin; b < end; ++b) {
        engine.push_back(engine_hash(w, all[b]));
        sequence.push_back(all[b]);
      }
      // The event carries only its own tokens; the index chains them from the parent.
      index.apply_stored(w, make_stored(engine, parent, {doc.begin() + static_cast<std::ptrdiff_t>(begin),
                                                         doc.begin() + static_cast<std::ptrdiff_t>(end)}));
      reference.stored(w, parent, engine, sequence);
    } else if (kind < 90) {
      auto known = reference.engine_hashes(w);
      std::vector<std::uint64_t> victims;
      for (std::uint64_t h : known)
        if (rng() % 4 == 0) victims.push_back(h);
      if (rng() % 5 == 0) victims.push_back(rng());  // unknown
      index.apply_removed(w, kv_removed{victims});
      reference.removed(w, victims);
    } else if (kind < 97) {
      index.apply_cleared(w);
      reference.cleared(w);
    } else {
      index.remove_worker(w);
      reference.cleared(w);
    }

    if (step % 50 == 49) {
      std::uint64_t total = 0;
      std::vector<std::uint64_t> blocks;
      for (worker_id v = 0; v < n_workers; ++v) {
        blocks.clear();
        index.collect_worker_blocks(v, blocks);
        const auto expected = reference.blocks_of(v);
        ASSERT_EQ(std::set<std::uint64_t>(blocks.begin(), blocks.end()), expected) << "worker " << v << " step " << step;
        ASSERT_EQ(index.worker_blocks(v), expected.size());
        total += expected.size();
      }
      ASSERT_EQ(index.total_blocks(), total);
      std::vector<std::uint32_t> out;
      for (int q = 0; q < 10; ++q) {
        auto prompt = docs[rng() % docs.size()];
        if (rng() % 2) prompt.push_back(999 * 16);  // a suffix nobody has
        const auto hashes = request_hashes(prompt);
        index.find_matches(hashes, out);
        for (worker_id v = 0; v < n_workers; ++v) {
          const std::uint32_t got = v < out.size() ? out[v] : 0;
          ASSERT_EQ(got, reference.overlap(v, hashes)) << "worker " << v << " step " << step;
        }
      }
    }
  }
}

TEST(prefix_index_differential, agrees_with_the_reference_model_on_random_event_streams) {
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    run_stream(seed, 3000);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace kvr
