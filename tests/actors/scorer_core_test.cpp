// The scorer's core: decisions taken on the caller's thread while the routing state is free,
// left to the scorer actor while it is busy or requests wait in the queue, and the steps of
// requests' lives applied in the order they were reported, whoever applies them. A real scorer
// actor runs in a CAF system; "busy" is another thread holding the state.

#include "actors/pipeline/scorer.hpp"

#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "actors/pipeline/runtime.hpp"

namespace kvr {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

/// A scorer of `workers` workers (least-loaded: every decision reads the bookings), queueing
/// where `queue` says so: a worker is busy past half of a 100-token batch.
struct running_scorer {
  caf::actor_system_config config;
  std::optional<caf::actor_system> system;
  scorer_handle scorer;

  explicit running_scorer(std::uint32_t workers, bool queue = false) {
    configure_actor_system(config, 1);
    system.emplace(config);
    scorer_settings settings;
    settings.routing.config.mode = router_mode::least_loaded;
    if (queue) {
      settings.routing.config.busy_threshold = 0.5;
      settings.routing.config.max_num_batched_tokens = 100;
    }
    for (std::uint32_t w = 0; w < workers; ++w) settings.routing.worker_names.push_back(std::to_string(w));
    scorer = spawn_scorer(*system, settings);
  }
  ~running_scorer() {
    caf::anon_send_exit(scorer.actor, caf::exit_reason::user_shutdown);
    system->await_all_actors_done();
  }

  [[nodiscard]] std::uint32_t requests_on(std::uint32_t worker) {
    return scorer.core->hold()->router->status(steady::now()).workers[worker].requests;
  }
};

route_query query(std::uint64_t request_id, std::uint32_t prompt_tokens = 10) {
  return {.request_id = request_id, .prompt_tokens = prompt_tokens};
}

/// Runs `work` while another thread holds the scorer's state.
template <class Work>
void while_held(scorer_core& core, Work work) {
  std::promise<void> holding, done;
  std::thread holder([&] {
    auto held = core.hold();
    holding.set_value();
    done.get_future().wait();
  });
  holding.get_future().wait();
  work();
  done.set_value();
  holder.join();
}

/// Waits (at most 5 s) until `condition` holds.
template <class Condition>
bool eventually(Condition condition) {
  const auto until = steady::now() + 5s;
  while (!condition()) {
    if (steady::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

/// An actor that takes its system's thread when sent anything: it says so through `running`,
/// then waits for `released`. (Its arguments are spawn arguments: CAF 0.17 binds a null
/// reference for a function actor spawned with none, which UBSan reports.)
caf::behavior blocker(caf::event_based_actor*, std::promise<void>* running, std::shared_future<void> released) {
  return {[running, released](int) {
    running->set_value();
    released.wait();
  }};
}

/// The decision taken here once the state is free: the scorer actor holds it for its own
/// messages (its start, its ticks), when a decision here is declined and would go to it.
std::optional<route_decision> decided_here(scorer_core& core, const route_query& query) {
  std::optional<route_decision> decision;
  eventually([&] { return (decision = core.try_decide(query)).has_value(); });
  return decision;
}

TEST(scorer_core, a_free_state_decides_on_the_calling_thread_and_books_the_request) {
  running_scorer s(2);
  const auto first = decided_here(*s.scorer.core, query(1));
  ASSERT_TRUE(first && first->ok());
  EXPECT_EQ(s.requests_on(first->worker), 1u);
  const auto second = decided_here(*s.scorer.core, query(2));
  ASSERT_TRUE(second && second->ok());
  EXPECT_NE(second->worker, first->worker) << "the first booking counted in the second decision";
}

TEST(scorer_core, a_busy_state_leaves_the_decision_to_the_scorer_actor) {
  running_scorer s(2);
  std::optional<route_decision> decided;
  while_held(*s.scorer.core, [&] {
    std::thread([&] { decided = s.scorer.core->try_decide(query(1)); }).join();
  });
  EXPECT_FALSE(decided);
  EXPECT_EQ(s.requests_on(0) + s.requests_on(1), 0u) << "nothing was booked";
}

TEST(scorer_core, a_step_left_behind_a_busy_state_wakes_the_scorer_which_applies_it) {
  running_scorer s(1);
  ASSERT_TRUE(decided_here(*s.scorer.core, query(1)));
  while_held(*s.scorer.core, [&] {
    std::thread([&] { s.scorer.core->report({lifecycle_event::kind::finished, 1, 0, 0}, s.scorer.actor); }).join();
    EXPECT_EQ(s.scorer.core->steps_waiting(), 1u);
  });
  EXPECT_TRUE(eventually([&] { return s.scorer.core->steps_waiting() == 0; })) << "the scorer was not woken for it";
  EXPECT_EQ(s.requests_on(0), 0u);
}

TEST(scorer_core, a_failure_left_behind_a_busy_state_is_applied_before_the_retry_is_decided) {
  running_scorer s(2);
  const auto first = decided_here(*s.scorer.core, query(7));
  ASSERT_TRUE(first && first->ok());
  // The scorer actor cannot run until released (its system's one thread is taken), so the step
  // can only reach the state through the retry's own decision.
  std::promise<void> running, release;
  caf::anon_send(s.system->spawn(blocker, &running, release.get_future().share()), 1);
  running.get_future().wait();
  while_held(*s.scorer.core, [&] {
    std::thread([&] { s.scorer.core->report({lifecycle_event::kind::worker_failed, 7, first->worker, 0}, s.scorer.actor); }).join();
  });
  EXPECT_EQ(s.scorer.core->steps_waiting(), 1u);
  const std::array<std::uint32_t, 1> excluded{first->worker};
  route_query again = query(7);
  again.excluded_workers = excluded;
  const auto retry = s.scorer.core->try_decide(again);
  release.set_value();
  ASSERT_TRUE(retry && retry->ok());
  EXPECT_NE(retry->worker, first->worker);
  // Applied after the retry's booking, the failure would have released that booking (same id).
  EXPECT_EQ(s.requests_on(first->worker), 0u) << "the failed attempt's booking was released";
  EXPECT_EQ(s.requests_on(retry->worker), 1u) << "the retry's booking survived its attempt's failure";
}

TEST(scorer_core, a_new_request_waits_behind_queued_ones_and_a_step_applied_here_serves_the_queue) {
  running_scorer s(1, /*queue=*/true);
  const auto first = decided_here(*s.scorer.core, query(1, 80));  // 80 > 0.5 x 100: the worker is busy after it
  ASSERT_TRUE(first && first->ok());
  EXPECT_FALSE(s.scorer.core->try_decide(query(2, 10))) << "every worker is busy: the scorer queues it";
  // Queued through the actor, as ingress does with a declined job.
  std::promise<route_decision> answer;
  auto job = std::make_shared<route_job>();
  job->request_id = 2;
  job->request = std::make_shared<const routing_request>();
  job->prompt_tokens = 10;
  job->reply = [&answer](route_decision decision) { answer.set_value(std::move(decision)); };
  caf::anon_send(s.scorer.actor, job);
  ASSERT_TRUE(eventually([&] { return s.scorer.core->hold()->queue->size() == 1; }));
  // The worker stops being busy (its first token: the prefill is done); a third request
  // still waits behind the second, which the step serves.
  auto served = answer.get_future();
  s.scorer.core->report({lifecycle_event::kind::first_token, 1, 0, 0}, s.scorer.actor);
  ASSERT_EQ(served.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(served.get().ok());
}

TEST(scorer_core, a_retired_core_decides_nothing_and_keeps_no_steps) {
  running_scorer s(1);
  caf::anon_send_exit(s.scorer.actor, caf::exit_reason::user_shutdown);
  ASSERT_TRUE(eventually([&] { return s.scorer.core->retired(); }));
  EXPECT_FALSE(s.scorer.core->try_decide(query(1)));
  s.scorer.core->report({lifecycle_event::kind::finished, 1, 0, 0}, s.scorer.actor);
  EXPECT_EQ(s.scorer.core->steps_waiting(), 0u);
}

}  // namespace
}  // namespace kvr
