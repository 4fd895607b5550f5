#include "actors/pipeline/scorer_core.hpp"

#include "actors/pipeline/scorer.hpp"
#include "actors/replica/peer_inbox.hpp"
#include "actors/replica/replica_hub.hpp"

namespace kvr {

route_query query_of(const route_job& job) {
  return {.request_id = job.request_id,
          .sequence_hashes = job.sequence_hashes,
          .prompt_tokens = job.prompt_tokens > 0 ? job.prompt_tokens : job.request->prompt_tokens,
          .excluded_workers = job.excluded_workers,
          .dry_run = job.dry_run,
          .session = job.session,
          .disaggregate = job.disaggregate};
}

route_decision failed_with(route_failure why) {
  route_decision decision;
  decision.failure = why;
  return decision;
}

void scorer_core::state::publish() {
  auto status = std::make_shared<scorer_snapshot>(router->status(clock_type::now()));
  status->admission = admission;
  snapshot->store(std::move(status));
}

void scorer_core::state::publish_depth() {
  for (std::size_t c = 0; c < priority_classes; ++c) {
    const auto priority = static_cast<request_priority>(c);
    snapshot->store_queue_depth(priority, queue->size(priority));
  }
  if (inbox) inbox->set_queue_waiting(!queue->empty());
}

void scorer_core::state::published_status(clock_type::time_point now) {
  published_at = now;
  status_stale = false;
  if (inbox) inbox->wake_from(now + std::chrono::milliseconds(10));
}

/// A change within 10 ms of the last publish waits for the next peer check (250 ms): no timer
/// per change. Without replicas the once-a-second tick publishes.
void scorer_core::state::publish_soon() {
  if (!replicas) return;
  const auto now = clock_type::now();
  if (now - published_at < std::chrono::milliseconds(10)) {
    status_stale = true;
    return;
  }
  publish();
  published_status(now);
}

void scorer_core::state::dispatch(time_point now) {
  while (const auto* head = queue->head(now)) {
    route_decision decision = router->decide(query_of(*head->payload), now);
    if (decision.failure == route_failure::every_worker_busy) return;
    auto entry = queue->pop_head(now);
    ++admission.admitted_after_wait;
    decision.queued_for = now - entry.arrival;
    if (decision.ok()) admission.wait.record(decision.queued_for);
    entry.payload->reply(std::move(decision));
    publish_depth();
  }
}

void scorer_core::state::expire_queue(time_point now) {
  queue->expire(now, [&](auto&& entry) {
    ++admission.timed_out;
    entry.payload->reply(failed_with(route_failure::queue_timeout));
  });
  publish_depth();
}

void scorer_core::state::after_booking_steps() {
  if (!replicas || router->outbox_size() == 0) return;
  replicas->share(set_name, scorer, router->take_outbox());
  publish_soon();
}

void scorer_core::state::on_capacity_change() {
  if (!queue->empty()) dispatch(clock_type::now());
  after_booking_steps();
}

void scorer_core::state::take_peer_messages() {
  if (!inbox) return;
  const auto messages = inbox->take();
  if (messages.empty()) return;
  const auto now = clock_type::now();
  for (const peer_message_ptr& message : messages)
    std::visit([&](const auto& m) { router->on_peer_message(m, now); }, *message);
  publish_soon();
  on_capacity_change();  // a peer's finish may free a worker this set's queue waits for
}

void scorer_core::state::apply_steps(const std::vector<lifecycle_event>& steps) {
  if (steps.empty()) return;
  const auto now = clock_type::now();
  bool failures = false;
  for (const lifecycle_event& step : steps) {
    router->on_lifecycle(step, now);
    failures |= step.what == lifecycle_event::kind::worker_failed;
  }
  if (failures) publish();  // ingress's local picks read health from the snapshot
  on_capacity_change();
}

scorer_core::scorer_core(worker_set_router_settings routing, std::shared_ptr<scorer_snapshot_cell> snapshot,
                         std::shared_ptr<replica_hub> replicas, std::string set_name) {
  state_.admission.enabled = queues_when_busy(routing.config);
  state_.queue.emplace(admission_settings_of(routing.config));
  state_.router.emplace(std::move(routing));
  state_.snapshot = std::move(snapshot);
  state_.replicas = std::move(replicas);
  state_.set_name = std::move(set_name);
  if (state_.replicas) state_.inbox = std::make_shared<peer_inbox>();
}

scorer_core::held scorer_core::hold() {
  std::unique_lock lock(mutex_);
  state_.apply_steps(take_steps(false));
  return {std::move(lock), state_};
}

std::optional<scorer_core::held> scorer_core::try_hold() {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock() || retired_.load(std::memory_order_relaxed)) return std::nullopt;
  state_.apply_steps(take_steps(false));
  return held(std::move(lock), state_);
}

std::vector<lifecycle_event> scorer_core::take_steps(bool scorer_rests_if_none) {
  std::vector<lifecycle_event> steps;
  std::lock_guard lock(steps_mutex_);
  steps.swap(steps_);
  if (steps.empty() && scorer_rests_if_none) scorer_woken_ = false;  // a step left from now on wakes it again
  return steps;
}

std::optional<route_decision> scorer_core::try_decide(const route_query& query) {
  auto held = try_hold();
  if (!held) return std::nullopt;
  state& s = **held;
  s.take_peer_messages();
  if (!s.queue->empty()) return std::nullopt;  // behind requests already waiting, a new one waits too
  route_decision decision = s.router->decide(query, clock_type::now());
  if (decision.failure == route_failure::every_worker_busy) return std::nullopt;  // the scorer queues it
  s.after_booking_steps();
  return decision;
}

void scorer_core::report(const lifecycle_event& step, const scorer_actor& scorer) {
  if (retired_.load(std::memory_order_relaxed)) return;
  {
    std::lock_guard lock(steps_mutex_);
    steps_.push_back(step);
  }
  if (try_hold()) return;  // applied, with any step left before it
  // Busy: the holder applied what waited when it took the state, not this step.
  bool wake = false;
  {
    std::lock_guard lock(steps_mutex_);
    if (!steps_.empty() && !scorer_woken_) wake = scorer_woken_ = true;
  }
  if (wake) caf::anon_send(scorer, steps_waiting_atom_v);
}

void scorer_core::apply_waiting_steps() {
  std::unique_lock lock(mutex_);
  // Until none is left: a step left while these apply finds the scorer still marked woken and
  // does not wake it again, so it is applied here. (Marked not woken before applying, every
  // step reported meanwhile would wake it once more, and under steady load it would never rest.)
  for (auto steps = take_steps(true); !steps.empty(); steps = take_steps(true)) state_.apply_steps(steps);
}

void scorer_core::retire() {
  std::lock_guard lock(mutex_);
  retired_.store(true, std::memory_order_relaxed);
  std::lock_guard steps_lock(steps_mutex_);
  steps_.clear();
}

std::size_t scorer_core::steps_waiting() const {
  std::lock_guard lock(steps_mutex_);
  return steps_.size();
}

}  // namespace kvr
