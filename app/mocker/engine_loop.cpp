#include "app/mocker/engine_loop.hpp"

#include <algorithm>
#include <chrono>
#include <optional>

#include <nlohmann/json.hpp>

namespace kvr::mocker {

namespace {
double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

engine_loop::engine_loop(engine_settings settings, std::unique_ptr<event_publisher> publisher)
    : engine_(settings), publisher_(std::move(publisher)), thread_([this] { run(); }) {}

engine_loop::~engine_loop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void engine_loop::submit(sequence_request request, output_sink sink) {
  {
    std::lock_guard lock(mutex_);
    sinks_[request.id] = std::move(sink);
    engine_.submit(std::move(request));
  }
  wake_.notify_all();
}

void engine_loop::abort(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  engine_.abort(id);
  sinks_.erase(id);
}

void engine_loop::restart() {
  std::vector<std::pair<output_sink, sequence_output>> ended;
  {
    std::lock_guard lock(mutex_);
    for (const sequence_output& out : engine_.restart()) {
      if (auto it = sinks_.find(out.id); it != sinks_.end()) ended.emplace_back(std::move(it->second), out);
    }
    sinks_.clear();
    ++restarts_;
    if (publisher_) publisher_->restart();
  }
  for (auto& [sink, out] : ended) sink(out);
}

rank_snapshot engine_loop::snapshot() const {
  std::lock_guard lock(mutex_);
  rank_snapshot s{engine_.running(), engine_.waiting(), engine_.cache().usage(), engine_.cache().cached_blocks(),
                  engine_.counters()};
  s.block_size = engine_.settings().block_size;
  s.num_blocks = engine_.settings().num_blocks;
  if (publisher_) {
    s.event_batches = publisher_->counters().batches;
    s.dropped_batches = publisher_->counters().dropped;
  }
  return s;
}

void engine_loop::set_drop_pct(double pct) {
  std::lock_guard lock(mutex_);
  if (publisher_) publisher_->set_drop_pct(pct);
}

std::size_t engine_loop::load() const {
  std::lock_guard lock(mutex_);
  return engine_.running() + engine_.waiting();
}

nlohmann::json engine_loop::dump() const {
  std::vector<cached_block> blocks;
  {
    std::lock_guard lock(mutex_);
    blocks = engine_.cache().dump();
  }
  std::vector<std::uint64_t> sequence_hashes, engine_hashes;
  for (const cached_block& b : blocks) {
    sequence_hashes.push_back(b.router_sequence_hash);
    engine_hashes.push_back(b.engine_hash);
  }
  std::sort(sequence_hashes.begin(), sequence_hashes.end());
  std::sort(engine_hashes.begin(), engine_hashes.end());
  // u64 as strings, as kvrouter's index dumps them (JSON readers lose precision above 2^53).
  nlohmann::json out = {{"blocks", blocks.size()}, {"sequence_hashes", nlohmann::json::array()},
                        {"engine_hashes", nlohmann::json::array()}};
  for (std::uint64_t h : sequence_hashes) out["sequence_hashes"].push_back(std::to_string(h));
  for (std::uint64_t h : engine_hashes) out["engine_hashes"].push_back(std::to_string(h));
  return out;
}

void engine_loop::run() {
  using clock = std::chrono::steady_clock;
  std::unique_lock lock(mutex_);
  std::optional<clock::time_point> previous_end;  ///< when the last step's tokens came out, while busy
  while (true) {
    if (!stop_ && engine_.idle()) {
      wake_.wait(lock, [this] { return stop_ || !engine_.idle(); });
      previous_end.reset();  // idle in between: the next step starts now
    }
    if (stop_) return;
    // A step runs from the previous one's end (or now, after idling): the scheduler's own work
    // (handing out the last step's tokens, cache lookups, hashing a long prompt) is part of the
    // step's modelled time, not added to it, so a loaded mocker keeps to its timing model.
    const clock::time_point started = previous_end.value_or(clock::now());
    step_result step = engine_.step();
    const std::uint64_t epoch = restarts_;
    lock.unlock();
    // The step's compute time passes before its tokens exist.
    const clock::time_point ends = started + std::chrono::duration_cast<clock::duration>(
                                                 std::chrono::duration<double, std::micro>(step.duration_us));
    std::this_thread::sleep_until(ends);
    // A late wake-up (a loaded machine) is made up by the next step, up to a millisecond: beyond,
    // the mocker is behind its model and the next step starts when it can.
    previous_end = std::max(ends, clock::now() - std::chrono::milliseconds(1));
    lock.lock();
    if (restarts_ != epoch) continue;  // restarted meanwhile: this step's cache changes are gone
    if (publisher_) publisher_->publish(std::move(step.events), wall_seconds());
    for (const sequence_output& out : step.outputs) {
      auto it = sinks_.find(out.id);
      if (it == sinks_.end()) continue;  // aborted meanwhile
      it->second(out);
      if (out.finished) sinks_.erase(it);
    }
  }
}

}  // namespace kvr::mocker
