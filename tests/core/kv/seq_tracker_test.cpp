// The sequence tracker behind a fake transport modelled on ZeroMQ: an engine publishes batches
// of real KV events, the live channel (PUB/SUB) loses some but never duplicates or reorders,
// a replay endpoint serves its buffer on another socket while live delivery continues (so live
// copies of replayed batches arrive late), engines may restart, and the router's index must
// end equal to the lossless one.

#include "core/kv/seq_tracker.hpp"

#include <algorithm>
#include <deque>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "core/routing/prefix_index.hpp"

namespace kvr {
namespace {

constexpr std::uint32_t block_size = 4;

/// An engine's prefix cache driven at random; each step yields one batch of events.
class fake_engine {
 public:
  explicit fake_engine(std::uint64_t seed) : rng_(seed) {}

  kv_batch step() {
    kv_batch batch;
    const int n = 1 + static_cast<int>(rng_() % 3);
    for (int i = 0; i < n; ++i) {
      if (cached_.empty() || rng_() % 10 < 6) {
        kv_stored stored;
        stored.block_size = block_size;
        if (!cached_.empty() && rng_() % 3 != 0) stored.parent_block_hash = cached_[rng_() % cached_.size()];
        const int blocks = 1 + static_cast<int>(rng_() % 4);
        for (int b = 0; b < blocks; ++b) {
          stored.block_hashes.push_back(++next_hash_);
          cached_.push_back(next_hash_);
          for (std::uint32_t t = 0; t < block_size; ++t) stored.token_ids.push_back(static_cast<std::uint32_t>(rng_() % 1000));
        }
        batch.events.emplace_back(std::move(stored));
      } else {
        kv_removed removed;
        const std::size_t victim = rng_() % cached_.size();
        removed.block_hashes.push_back(cached_[victim]);
        cached_.erase(cached_.begin() + static_cast<std::ptrdiff_t>(victim));
        batch.events.emplace_back(std::move(removed));
      }
    }
    return batch;
  }

 private:
  std::mt19937_64 rng_;
  std::vector<std::uint64_t> cached_;
  std::uint64_t next_hash_ = 0;
};

void apply(prefix_index& index, const kv_batch& batch) {
  for (const kv_event& event : batch.events) index.apply(0, event);
}

std::set<std::uint64_t> blocks(const prefix_index& index) {
  std::vector<std::uint64_t> out;
  index.collect_worker_blocks(0, out);
  return {out.begin(), out.end()};
}

struct channel_profile {
  int loss_pct = 0;
  std::size_t replay_buffer = 100000;
  bool replay_available = true;
  /// The engine restarts (empty cache, sequence back at 0) before this batch, and the live
  /// channel loses the restarted engine's first `lost_after_restart` batches (its new PUB
  /// socket sends them before the router's SUB has reconnected). 0 = no restart.
  std::size_t restart_at = 0;
  std::size_t lost_after_restart = 0;
  /// The last batches are all delivered: a rebuilt index must hold what they store.
  std::size_t lossless_tail = 0;
};

struct run_result {
  std::set<std::uint64_t> router;
  std::set<std::uint64_t> truth;
  seq_counters counters;
  /// Blocks of sequences the lossless tail started afresh (no parent), since the router's last
  /// clear, that the engine still holds: whatever the router cleared, it must have these.
  std::set<std::uint64_t> tail_roots;
};

/// Publishes `batches` batches through the profile's channel; returns the router's and the
/// lossless index contents.
run_result run(std::uint64_t seed, std::size_t batches, const channel_profile& profile) {
  std::mt19937_64 rng(seed ^ 0xABCDEF);
  fake_engine engine(seed);
  std::vector<kv_batch> published;  // by sequence number
  prefix_index truth(block_size, 1u << 30);
  prefix_index router(block_size, 1u << 30);
  seq_tracker<kv_batch> tracker(profile.replay_available);

  std::deque<std::pair<std::uint64_t, kv_batch>> live;    // in flight to the router
  std::deque<std::pair<std::uint64_t, kv_batch>> replay;  // replay replies in flight
  bool replay_end_pending = false;

  // The router's index as the subscriber keeps it; each batch carries its publish index in
  // `timestamp`, so the first batch applied after a clear tells from where the index rebuilt.
  bool cleared = false;
  double rebuilt_from = 0;
  auto router_clear = [&] {
    router.apply_cleared(0);
    cleared = true;
  };
  auto router_apply = [&](const kv_batch& batch) {
    if (cleared) rebuilt_from = batch.timestamp;
    cleared = false;
    apply(router, batch);
  };
  auto request_replay = [&]() {
    // The replay endpoint answers from its buffer, starting later when history is gone.
    const std::size_t oldest = published.size() > profile.replay_buffer ? published.size() - profile.replay_buffer : 0;
    for (std::size_t s = std::max<std::size_t>(tracker.replay_from(), oldest); s < published.size(); ++s)
      replay.emplace_back(s, published[s]);
    replay_end_pending = true;
  };
  auto handle = [&](seq_action action, kv_batch& batch) {
    switch (action) {
      case seq_action::apply: router_apply(batch); break;
      case seq_action::clear_and_apply:
        router_clear();
        router_apply(batch);
        break;
      case seq_action::request_replay: request_replay(); break;
      case seq_action::clear_and_request_replay:
        router_clear();
        request_replay();
        break;
      case seq_action::hold:
      case seq_action::skip_duplicate: break;
    }
  };
  auto deliver_one = [&]() {
    // Live and replay traffic interleave at random, as on two sockets.
    const bool take_replay = !replay.empty() || replay_end_pending ? (live.empty() || rng() % 2 == 0) : false;
    if (take_replay) {
      if (!replay.empty()) {
        auto [seq, batch] = std::move(replay.front());
        replay.pop_front();
        handle(tracker.on_replay(seq, batch), batch);
      } else {
        replay_end_pending = false;
        std::vector<kv_batch> held;
        const auto outcome = tracker.on_replay_end(true, held);
        if (outcome.clear_first) router_clear();
        for (const kv_batch& b : held) router_apply(b);
        if (outcome.replay_again) request_replay();
      }
      return;
    }
    auto [seq, batch] = std::move(live.front());
    live.pop_front();
    handle(tracker.on_live(seq, batch), batch);
  };

  std::size_t restarted_at = 0;
  std::vector<std::set<std::uint64_t>> roots;  ///< per publish index: blocks of sequences it starts
  for (std::size_t n = 0; n < batches; ++n) {
    if (profile.restart_at > 0 && n == profile.restart_at) {
      engine = fake_engine(seed + 1000);
      truth.apply_cleared(0);
      published.clear();
      restarted_at = n;
    }
    const std::uint64_t seq = published.size();
    kv_batch batch = engine.step();
    batch.timestamp = static_cast<double>(n);
    apply(truth, batch);
    published.push_back(batch);
    const bool in_tail = n + profile.lossless_tail >= batches;
    roots.emplace_back();
    for (const kv_event& event : batch.events)
      if (const auto* stored = std::get_if<kv_stored>(&event); stored && !stored->parent_block_hash) {
        prefix_index scratch(block_size, 1u << 20);
        scratch.apply(0, event);
        const auto b = blocks(scratch);
        roots.back().insert(b.begin(), b.end());
      }
    const bool last = n + 1 == batches || in_tail;  // delivered, or no gap could show
    const bool lost_at_restart = restarted_at > 0 && n - restarted_at < profile.lost_after_restart;
    if (!last && (lost_at_restart || static_cast<int>(rng() % 100) < profile.loss_pct)) continue;
    live.emplace_back(seq, batch);
    while (live.size() > 3 || (rng() % 2 == 0 && !live.empty())) deliver_one();
  }
  while (!live.empty() || !replay.empty() || replay_end_pending) deliver_one();
  const auto held = blocks(truth);
  std::set<std::uint64_t> surviving;
  const std::size_t from = std::max<std::size_t>(static_cast<std::size_t>(rebuilt_from), batches - profile.lossless_tail);
  for (std::size_t n = from; profile.lossless_tail > 0 && !cleared && n < batches; ++n)
    for (std::uint64_t block : roots[n])
      if (held.contains(block)) surviving.insert(block);
  return {blocks(router), held, tracker.counters(), surviving};
}

TEST(seq_tracker, a_lossless_stream_applies_every_batch_in_order) {
  const auto result = run(1, 500, {});
  EXPECT_EQ(result.router, result.truth);
  EXPECT_EQ(result.counters.gaps, 0u);
  EXPECT_EQ(result.counters.applied, 500u);
}

TEST(seq_tracker, after_replay_the_index_equals_the_lossless_one_under_loss) {
  std::uint64_t late_copies = 0;
  for (int loss : {5, 33, 66})
    for (std::uint64_t seed = 1; seed <= 10; ++seed) {
      SCOPED_TRACE(::testing::Message() << "loss " << loss << "% seed " << seed);
      const auto result = run(seed, 400, {.loss_pct = loss});
      EXPECT_FALSE(result.truth.empty());
      EXPECT_EQ(result.router, result.truth);
      EXPECT_GT(result.counters.gaps, 0u);
      EXPECT_GT(result.counters.replayed, 0u);
      EXPECT_EQ(result.counters.history_missing, 0u);
      EXPECT_EQ(result.counters.restarts, 0u) << "late live copies of replayed batches are not restarts";
      late_copies += result.counters.duplicates;
    }
  EXPECT_GT(late_copies, 0u) << "the runs exercise live copies arriving after their replay";
}

TEST(seq_tracker, an_engine_restart_whose_first_batches_were_lost_is_replayed_from_zero) {
  for (std::size_t lost : {1, 5, 40})
    for (std::uint64_t seed = 1; seed <= 10; ++seed) {
      SCOPED_TRACE(::testing::Message() << lost << " lost after the restart, seed " << seed);
      const auto result = run(seed, 400, {.restart_at = 200, .lost_after_restart = lost});
      EXPECT_EQ(result.counters.restarts, 1u);
      EXPECT_EQ(result.router, result.truth) << "the old engine's blocks are gone, the new one's all there";
    }
}

TEST(seq_tracker, without_a_replay_endpoint_an_engine_restart_still_clears_the_old_cache) {
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    const auto result = run(seed, 400, {.replay_available = false, .restart_at = 200, .lost_after_restart = 5, .lossless_tail = 40});
    EXPECT_EQ(result.counters.restarts, 1u);
    EXPECT_TRUE(std::includes(result.truth.begin(), result.truth.end(), result.router.begin(), result.router.end()))
        << "the router never believes a block the engine does not have (seed " << seed << ")";
    EXPECT_FALSE(result.tail_roots.empty());
    EXPECT_TRUE(std::includes(result.router.begin(), result.router.end(), result.tail_roots.begin(), result.tail_roots.end()))
        << "and it rebuilds from what arrives after its clear (seed " << seed << ")";
  }
}

TEST(seq_tracker, missing_history_clears_the_worker_and_keeps_only_what_the_engine_has) {
  std::uint64_t history_missing = 0;
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    const auto result = run(seed, 400, {.loss_pct = 40, .replay_buffer = 2, .lossless_tail = 40});
    history_missing += result.counters.history_missing;
    EXPECT_TRUE(std::includes(result.truth.begin(), result.truth.end(), result.router.begin(), result.router.end()))
        << "the router never believes a block the engine does not have (seed " << seed << ")";
    EXPECT_FALSE(result.tail_roots.empty());
    EXPECT_TRUE(std::includes(result.router.begin(), result.router.end(), result.tail_roots.begin(), result.tail_roots.end()))
        << "and it rebuilds from what arrives after its clear (seed " << seed << ")";
  }
  EXPECT_GT(history_missing, 0u);
}

TEST(seq_tracker, without_a_replay_endpoint_a_gap_clears_and_rebuilds_from_live) {
  const auto result = run(3, 300, {.loss_pct = 20, .replay_available = false, .lossless_tail = 40});
  EXPECT_GT(result.counters.replay_unavailable, 0u);
  EXPECT_EQ(result.counters.replay_requests, 0u);
  EXPECT_TRUE(std::includes(result.truth.begin(), result.truth.end(), result.router.begin(), result.router.end()));
  EXPECT_FALSE(result.tail_roots.empty());
  EXPECT_TRUE(std::includes(result.router.begin(), result.router.end(), result.tail_roots.begin(), result.tail_roots.end()))
      << "live batches after the clear rebuild the index";
}

TEST(seq_tracker, a_sequence_restarting_at_zero_clears_the_worker) {
  seq_tracker<int> tracker(true);
  int payload = 0;
  for (std::uint64_t seq = 0; seq < 50; ++seq) EXPECT_EQ(tracker.on_live(seq, payload), seq_action::apply);
  EXPECT_EQ(tracker.on_live(0, payload), seq_action::clear_and_apply);
  EXPECT_EQ(tracker.on_live(1, payload), seq_action::apply);
  EXPECT_EQ(tracker.counters().restarts, 1u);
}

TEST(seq_tracker, a_live_sequence_at_or_below_the_last_live_one_is_a_restart) {
  seq_tracker<int> tracker(false);
  int payload = 0;
  for (std::uint64_t seq = 0; seq < 500; ++seq) tracker.on_live(seq, payload);
  EXPECT_EQ(tracker.on_live(5, payload), seq_action::clear_and_apply) << "the restart's batches 0 to 4 were lost";
  EXPECT_EQ(tracker.on_live(6, payload), seq_action::apply);
  EXPECT_EQ(tracker.counters().restarts, 1u);
  EXPECT_EQ(tracker.counters().duplicates, 0u);
}

TEST(seq_tracker, with_replay_a_restart_past_zero_clears_and_replays_from_zero) {
  seq_tracker<int> tracker(true);
  int payload = 0;
  for (std::uint64_t seq = 0; seq < 500; ++seq) tracker.on_live(seq, payload);
  payload = 3;
  EXPECT_EQ(tracker.on_live(3, payload), seq_action::clear_and_request_replay);
  EXPECT_EQ(tracker.replay_from(), 0u);
  for (std::uint64_t seq = 0; seq < 3; ++seq) EXPECT_EQ(tracker.on_replay(seq, payload), seq_action::apply);
  EXPECT_EQ(tracker.on_replay(3, payload), seq_action::apply);
  std::vector<int> held;
  const auto outcome = tracker.on_replay_end(true, held);
  EXPECT_FALSE(outcome.clear_first || outcome.replay_again);
  EXPECT_TRUE(held.empty()) << "the held batch 3 came again in the replay";
  payload = 4;
  EXPECT_EQ(tracker.on_live(4, payload), seq_action::apply);
}

TEST(seq_tracker, a_live_copy_of_a_replayed_batch_is_skipped) {
  seq_tracker<int> tracker(true);
  int payload = 0;
  tracker.on_live(0, payload);
  EXPECT_EQ(tracker.on_live(2, payload), seq_action::request_replay);
  for (std::uint64_t seq = 1; seq <= 4; ++seq) tracker.on_replay(seq, payload);  // the buffer had 3 and 4 already
  std::vector<int> held;
  tracker.on_replay_end(true, held);
  EXPECT_EQ(tracker.on_live(3, payload), seq_action::skip_duplicate) << "sent live before the replay, read after it";
  EXPECT_EQ(tracker.on_live(4, payload), seq_action::skip_duplicate);
  EXPECT_EQ(tracker.on_live(5, payload), seq_action::apply);
  EXPECT_EQ(tracker.counters().restarts, 0u);
}

TEST(seq_tracker, first_contact_mid_stream_asks_for_replay_from_zero) {
  seq_tracker<int> tracker(true);
  int payload = 7;
  EXPECT_EQ(tracker.on_live(42, payload), seq_action::request_replay);
  EXPECT_EQ(tracker.replay_from(), 0u);
  int replayed = 0;
  EXPECT_EQ(tracker.on_replay(0, replayed), seq_action::apply);
  std::vector<int> held;
  const auto outcome = tracker.on_replay_end(true, held);
  EXPECT_TRUE(outcome.replay_again) << "the replay stopped short of the held batch";
  EXPECT_EQ(tracker.replay_from(), 1u);
  EXPECT_TRUE(held.empty());
}

TEST(seq_tracker, a_failed_replay_clears_then_applies_what_was_held) {
  seq_tracker<int> tracker(true);
  int payload = 1;
  tracker.on_live(0, payload);
  payload = 3;
  EXPECT_EQ(tracker.on_live(3, payload), seq_action::request_replay);
  payload = 4;
  EXPECT_EQ(tracker.on_live(4, payload), seq_action::hold);
  std::vector<int> held;
  EXPECT_TRUE(tracker.on_replay_end(false, held).clear_first);
  EXPECT_EQ(held, (std::vector<int>{3, 4}));
  payload = 5;
  EXPECT_EQ(tracker.on_live(5, payload), seq_action::apply);
  EXPECT_EQ(tracker.counters().replay_unavailable, 1u);
}

TEST(seq_tracker, too_much_live_traffic_during_a_replay_abandons_it) {
  seq_tracker<int> tracker(true, 3);
  int payload = 0;
  tracker.on_live(0, payload);
  EXPECT_EQ(tracker.on_live(2, payload), seq_action::request_replay);
  EXPECT_EQ(tracker.on_live(3, payload), seq_action::hold);
  EXPECT_EQ(tracker.on_live(4, payload), seq_action::hold);
  EXPECT_EQ(tracker.on_live(5, payload), seq_action::clear_and_apply);
  EXPECT_FALSE(tracker.replaying());
  EXPECT_EQ(tracker.on_replay(1, payload), seq_action::skip_duplicate) << "late replies are ignored";
  EXPECT_EQ(tracker.counters().hold_overflows, 1u);
}

TEST(seq_tracker, a_sequence_jumping_past_its_replay_buffer_is_given_up_after_a_few_fruitless_replays) {
  seq_tracker<int> tracker(true);
  int payload = 0;
  for (std::uint64_t seq = 0; seq < 10; ++seq) ASSERT_EQ(tracker.on_live(seq, payload), seq_action::apply);
  constexpr std::uint64_t jump = 1'000'000'000'000;
  ASSERT_EQ(tracker.on_live(jump, payload), seq_action::request_replay);
  std::vector<int> to_apply;
  std::uint32_t replays = 1;
  for (;; ++replays) {
    ASSERT_LE(replays, seq_tracker<int>::max_replay_attempts) << "the replays must end";
    // The endpoint has nothing from 10 on: the replay ends at once, delivering nothing.
    const auto outcome = tracker.on_replay_end(true, to_apply);
    if (!outcome.replay_again) {
      EXPECT_TRUE(outcome.clear_first) << "giving up clears what the gap may have changed";
      break;
    }
    EXPECT_EQ(tracker.replay_attempts(), replays) << "each fruitless replay counts (the caller backs off by it)";
    EXPECT_EQ(tracker.replay_from(), 10u);
  }
  EXPECT_EQ(replays, seq_tracker<int>::max_replay_attempts);
  EXPECT_EQ(to_apply.size(), 1u) << "the held batch is applied";
  EXPECT_EQ(tracker.counters().replays_given_up, 1u);
  EXPECT_EQ(tracker.counters().replays_without_progress, seq_tracker<int>::max_replay_attempts);
  EXPECT_EQ(tracker.on_live(jump + 1, payload), seq_action::apply) << "in-order batches go on live";
  EXPECT_EQ(tracker.on_live(jump + 2, payload), seq_action::apply);
  EXPECT_EQ(tracker.counters().replay_requests, 3u) << "no replay is asked for once in-order batches resume";
}

TEST(seq_tracker, a_replay_that_delivers_resets_the_fruitless_count) {
  seq_tracker<int> tracker(true);
  int payload = 0;
  ASSERT_EQ(tracker.on_live(0, payload), seq_action::apply);
  ASSERT_EQ(tracker.on_live(5, payload), seq_action::request_replay);
  std::vector<int> to_apply;
  ASSERT_TRUE(tracker.on_replay_end(true, to_apply).replay_again);  // nothing delivered: attempt 1
  EXPECT_EQ(tracker.replay_attempts(), 1u);
  for (std::uint64_t seq = 1; seq < 5; ++seq) EXPECT_EQ(tracker.on_replay(seq, payload), seq_action::apply);
  const auto outcome = tracker.on_replay_end(true, to_apply);
  EXPECT_FALSE(outcome.replay_again);
  EXPECT_FALSE(outcome.clear_first);
  EXPECT_EQ(tracker.replay_attempts(), 0u);
  EXPECT_EQ(tracker.counters().replays_given_up, 0u);
}

TEST(seq_tracker, a_warm_start_replays_from_zero_before_any_batch) {
  seq_tracker<int> tracker(true);
  ASSERT_TRUE(tracker.start_warm_replay());
  EXPECT_EQ(tracker.replay_from(), 0u);
  int payload = 0;
  EXPECT_EQ(tracker.on_replay(5, payload), seq_action::clear_and_apply) << "the buffer starts at 5: history missing";
  EXPECT_EQ(tracker.on_replay(6, payload), seq_action::apply);
  payload = 7;
  EXPECT_EQ(tracker.on_live(7, payload), seq_action::hold) << "live traffic waits for the replay";
  std::vector<int> held;
  const auto outcome = tracker.on_replay_end(true, held);
  EXPECT_FALSE(outcome.replay_again);
  EXPECT_EQ(held, std::vector<int>{7});
  EXPECT_FALSE(tracker.start_warm_replay()) << "only before any batch";
}

TEST(seq_tracker, a_warm_start_that_finds_nothing_counts_nothing_and_waits_for_first_contact) {
  seq_tracker<int> tracker(true);
  ASSERT_TRUE(tracker.start_warm_replay());
  int payload = 3;
  EXPECT_EQ(tracker.on_live(3, payload), seq_action::hold);
  std::vector<int> held;
  // The replay timed out (the engine's replay socket is not up yet): the held batch is first
  // contact mid-stream, so a replay from 0 is asked again, this time for a known gap.
  const auto outcome = tracker.on_replay_end(false, held);
  EXPECT_TRUE(outcome.replay_again);
  EXPECT_FALSE(outcome.clear_first) << "nothing is cleared for a warm start that found nothing";
  EXPECT_EQ(tracker.replay_from(), 0u);
  EXPECT_EQ(tracker.counters().replays_without_progress, 0u);
  EXPECT_EQ(tracker.counters().replay_unavailable, 0u);

  seq_tracker<int> idle(true);
  ASSERT_TRUE(idle.start_warm_replay());
  EXPECT_FALSE(idle.on_replay_end(true, held).replay_again) << "an idle engine with an empty buffer";
  payload = 0;
  EXPECT_EQ(idle.on_live(0, payload), seq_action::apply) << "then its first batch is first contact";
  EXPECT_FALSE(seq_tracker<int>(false).start_warm_replay()) << "no replay endpoint, no warm start";
}

}  // namespace
}  // namespace kvr
