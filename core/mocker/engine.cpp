#include "core/mocker/engine.hpp"

#include <algorithm>

namespace kvr::mocker {

double timing_model::step_us(std::uint64_t prefill_tokens, std::uint32_t decode_batch, std::uint64_t transferred_blocks) const {
  if (prefill_tokens == 0 && decode_batch == 0 && transferred_blocks == 0) return 0;
  const double us = step_base_us + prefill_us_per_token * static_cast<double>(prefill_tokens) +
                    decode_us_per_sequence * decode_batch + transfer_us_per_block * static_cast<double>(transferred_blocks);
  return us / std::max(speedup, 1e-9);
}

engine::engine(engine_settings settings) : settings_(settings), cache_(settings.num_blocks, settings.block_size, settings.hybrid, settings.offload) {}

void engine::submit(sequence_request request) {
  if (cache_.blocks_needed(request.tokens.size(), request.max_new_tokens) > settings_.num_blocks)
    rejected_.push_back(std::move(request));
  else
    waiting_.push_back(std::move(request));
}

void engine::abort(std::uint64_t id) {
  if (auto it = running_.find(id); it != running_.end()) {
    cache_.release(it->second.blocks);
    running_.erase(it);
    std::erase(admission_order_, id);
    ++counters_.aborted_requests;
    return;
  }
  const auto before = waiting_.size();
  std::erase_if(waiting_, [id](const sequence_request& r) { return r.id == id; });
  if (waiting_.size() != before) ++counters_.aborted_requests;
}

step_result engine::step() {
  step_result result;
  for (sequence_request& r : rejected_)
    result.outputs.push_back({r.id, 0, 0, 0, true,
                              "the prompt and max_tokens need more KV blocks than the engine has (" +
                                  std::to_string(cache_.blocks_needed(r.tokens.size(), r.max_new_tokens)) + " > " +
                                  std::to_string(settings_.num_blocks) + ")"});
  rejected_.clear();

  // Decode first: sequences prefilled in an earlier step produce their next token.
  std::uint32_t decode_batch = 0;
  for (std::uint64_t id : admission_order_) {
    running_sequence& s = running_.at(id);
    if (!s.prefilled) continue;
    ++decode_batch;
    ++s.generated;
    result.outputs.push_back({id, 1, s.generated, s.cached_tokens, s.generated >= s.request.max_new_tokens, {}});
  }

  // Admit in arrival order while blocks and the batch size allow (FCFS: the head blocks the rest).
  std::uint64_t prefill_tokens = 0, transferred_blocks = 0;
  while (!waiting_.empty() && running_.size() < settings_.max_num_seqs) {
    if (settings_.max_num_batched_tokens > 0 && prefill_tokens >= settings_.max_num_batched_tokens) break;
    sequence_request& next = waiting_.front();
    auto blocks = cache_.allocate(next.tokens, next.max_new_tokens, result.events, next.images);
    if (!blocks) break;
    // Blocks loaded from the host tier are not computed: they cost a transfer each, as pulled ones do.
    const std::uint32_t cached = std::min<std::uint32_t>((blocks->reused_blocks + blocks->loaded_blocks) * settings_.block_size,
                                                         static_cast<std::uint32_t>(next.tokens.size()));
    transferred_blocks += blocks->loaded_blocks;
    counters_.host_loaded_blocks += blocks->loaded_blocks;
    counters_.prefix_queries_tokens += next.tokens.size();
    counters_.prefix_hits_tokens += cached;
    counters_.prompt_tokens += next.tokens.size();
    if (next.kv_pulled) {
      const std::uint64_t pulled = cache_.blocks_needed(next.tokens.size(), 0) - blocks->reused_blocks;
      transferred_blocks += pulled;
      counters_.pulled_blocks += pulled;
    } else {
      prefill_tokens += next.tokens.size() - cached;
    }
    const std::uint64_t id = next.id;
    running_sequence s{std::move(next), std::move(*blocks), 1, true, cached};
    waiting_.pop_front();
    // The first token comes out of the prefill step.
    result.outputs.push_back({id, 1, 1, cached, s.request.max_new_tokens <= 1, {}});
    running_.emplace(id, std::move(s));
    admission_order_.push_back(id);
  }

  for (const sequence_output& out : result.outputs) {
    counters_.generation_tokens += out.new_tokens;
    if (!out.finished || !out.error.empty()) continue;
    auto it = running_.find(out.id);
    cache_.release(it->second.blocks);
    running_.erase(it);
    std::erase(admission_order_, out.id);
    ++counters_.finished_requests;
  }
  result.duration_us = settings_.timing.step_us(prefill_tokens, decode_batch, transferred_blocks);
  return result;
}

std::vector<sequence_output> engine::restart() {
  std::vector<sequence_output> ended;
  for (std::uint64_t id : admission_order_) ended.push_back({id, 0, 0, 0, true, "the engine restarted"});
  for (const sequence_request& r : waiting_) ended.push_back({r.id, 0, 0, 0, true, "the engine restarted"});
  for (const sequence_request& r : rejected_) ended.push_back({r.id, 0, 0, 0, true, "the engine restarted"});
  running_.clear();
  admission_order_.clear();
  waiting_.clear();
  rejected_.clear();
  cache_.reset();
  return ended;
}

}  // namespace kvr::mocker
