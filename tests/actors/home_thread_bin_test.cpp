// The bin that hands a KV decoder thread's batches back to it to be freed: an object comes back
// from whichever thread drops it last and is freed only by the home thread, until the bin
// closes; none is lost or freed twice, whatever the threads do at once (also run under
// ThreadSanitizer: tests/tsan/run_tsan.sh home_thread_bin).

#include "actors/sources/home_thread_bin.hpp"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

namespace kvr {
namespace {

/// Counts its destructions.
struct tracked {
  static inline std::atomic<int> freed{0};
  ~tracked() { ++freed; }
};

/// Writes the id of the thread its destructor ran on to the test's slot.
struct thread_recorder {
  std::thread::id* slot = nullptr;
  ~thread_recorder() {
    if (slot != nullptr) *slot = std::this_thread::get_id();
  }
};

TEST(home_thread_bin, an_object_dropped_on_another_thread_is_freed_by_its_home_thread_only) {
  auto bin = std::make_shared<home_thread_bin<thread_recorder>>();
  std::thread::id freed_on;
  std::shared_ptr<thread_recorder> object = bin->make();
  object->slot = &freed_on;
  std::thread([dropped = std::move(object)]() mutable { dropped.reset(); }).join();
  EXPECT_EQ(freed_on, std::thread::id{}) << "not freed by the thread that dropped it";
  EXPECT_EQ(bin->waiting(), 1u);

  bin->free_returned();
  EXPECT_EQ(freed_on, std::this_thread::get_id());
  EXPECT_EQ(bin->waiting(), 0u);
}

TEST(home_thread_bin, once_closed_the_thread_that_drops_an_object_frees_it) {
  auto bin = std::make_shared<home_thread_bin<thread_recorder>>();
  std::thread::id freed_on, dropper;
  std::shared_ptr<thread_recorder> waiting = bin->make(), late = bin->make();
  late->slot = &freed_on;
  waiting.reset();
  EXPECT_EQ(bin->waiting(), 1u);
  bin->close();
  EXPECT_EQ(bin->waiting(), 0u) << "closing frees what came back";

  std::thread([&, dropped = std::move(late)]() mutable {
    dropper = std::this_thread::get_id();
    dropped.reset();
  }).join();
  EXPECT_EQ(freed_on, dropper);
  EXPECT_EQ(bin->waiting(), 0u);
}

TEST(home_thread_bin, objects_outliving_their_bins_owner_are_freed_with_the_bin) {
  const int before = tracked::freed.load();
  auto bin = std::make_shared<home_thread_bin<tracked>>();
  std::shared_ptr<tracked> object = bin->make();
  bin.reset();  // the home thread went away without closing; the object keeps the bin alive
  EXPECT_EQ(tracked::freed.load(), before);
  object.reset();
  EXPECT_EQ(tracked::freed.load(), before + 1);
}

TEST(home_thread_bin, objects_dropped_by_many_threads_while_the_home_thread_frees_are_each_freed_once) {
  constexpr int threads = 4, per_thread = 2000;
  const int before = tracked::freed.load();
  auto bin = std::make_shared<home_thread_bin<tracked>>();
  std::vector<std::vector<std::shared_ptr<tracked>>> objects(threads);
  for (auto& share : objects)
    for (int i = 0; i < per_thread; ++i) share.push_back(bin->make());
  std::atomic<int> done{0};
  std::vector<std::thread> droppers;
  for (auto& share : objects)
    droppers.emplace_back([&share, &done] {
      for (auto& object : share) object.reset();
      ++done;
    });
  while (done.load() < threads) bin->free_returned();
  for (std::thread& t : droppers) t.join();
  bin->free_returned();
  EXPECT_EQ(tracked::freed.load(), before + threads * per_thread);
  EXPECT_EQ(bin->waiting(), 0u);
}

}  // namespace
}  // namespace kvr
