#pragma once
/// kvrouter-bench's workloads: what to send and when, decided up front and deterministically
/// (seeded generators, no clock), so that every policy of a comparison sees the same requests.
///
/// - Mooncake traces (JSONL: `timestamp` ms, `input_length`, `output_length`, `hash_ids`, one
///   hash id per `block_tokens` tokens): each hash id becomes a fixed run of token ids, so
///   requests sharing hash ids share prompt prefixes exactly as the trace says.
/// - Shared-prefix groups: `groups` system prompts, each followed by `prompts_per_group`
///   different questions; optionally multi-turn (each turn resends the conversation so far).

#include <cstdint>
#include <expected>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace kvr::loadgen {

struct request_spec {
  double arrival_s = 0;  ///< when to send, from the start of the run (open loop)
  std::vector<std::uint32_t> prompt;  ///< a token-id completion, or:
  std::string messages_json;          ///< a chat (OpenAI messages), when not empty
  std::uint32_t max_tokens = 16;
};

struct trace_options {
  std::uint32_t block_tokens = 512;  ///< tokens per hash id (Mooncake: 512)
  double speedup = 1.0;              ///< timestamps divided by this
  std::size_t max_requests = 0;      ///< 0 = all
  std::uint32_t max_output_tokens = 0;  ///< 0 = as the trace says; else capped
};

/// Parses a Mooncake trace. Errors name the line.
[[nodiscard]] std::expected<std::vector<request_spec>, std::string> mooncake_trace(std::string_view jsonl,
                                                                                   const trace_options& options);

/// The trace's reuse ceiling: the share of its blocks (hash ids) seen earlier in the trace,
/// i.e. the best prefix-cache hit rate any router could reach with unbounded caches.
[[nodiscard]] std::expected<double, std::string> trace_reuse_ceiling(std::string_view jsonl, std::size_t max_requests = 0);

/// What `trace_cache_bounds` models: `engines` engines of `engine_blocks` blocks of `block_size`
/// tokens, each hash id `block_tokens` tokens (whole blocks).
struct cache_bound_options {
  std::uint32_t engines = 4;
  std::uint64_t engine_blocks = 65536;
  std::uint32_t block_size = 16;
  std::uint32_t block_tokens = 512;
  std::size_t max_requests = 0;  ///< 0 = all
};

/// Prefix-cache hit rates (hit tokens / prompt tokens, as engines count them) that bound what a
/// router can reach on a trace, its requests served in arrival order (lru_block_cache):
struct cache_bounds {
  double unbounded = 0;    ///< caches that never evict: reuse is the trace's alone
  double pooled = 0;       ///< one LRU cache of engines x engine_blocks: no placement keeps more
  double round_robin = 0;  ///< request i on engine i mod engines, each its own LRU
  std::uint64_t requests = 0;
  std::uint64_t prompt_tokens = 0;
  std::uint64_t distinct_blocks = 0;  ///< the trace's working set, in engine blocks
};

/// The bounds for a Mooncake trace. A request's last hash id may be partial: only its full
/// blocks can hit. Tokens past the hash ids (input_length beyond them) are unique filler, as in
/// `mooncake_trace`. Errors name the line.
[[nodiscard]] std::expected<cache_bounds, std::string> trace_cache_bounds(std::string_view jsonl,
                                                                          const cache_bound_options& options);

struct shared_prefix_options {
  std::uint32_t groups = 16;
  std::uint32_t prompts_per_group = 16;
  std::uint32_t system_tokens = 2048;
  std::uint32_t question_tokens = 128;
  std::uint32_t output_tokens = 32;
  std::uint32_t turns = 1;  ///< > 1: each conversation comes back with its answer and a new question
  std::uint64_t seed = 42;
};

/// Requests in a shuffled order (turn t of a conversation always after turn t - 1), arrival 0.
[[nodiscard]] std::vector<request_spec> shared_prefix(const shared_prefix_options& options);

struct image_chat_options {
  std::uint32_t groups = 8;               ///< system prompts
  std::uint32_t prompts_per_group = 16;
  std::uint32_t system_words = 300;
  std::uint32_t question_words = 20;
  std::uint32_t images_per_request = 1;
  std::uint32_t distinct_images = 32;     ///< images are drawn from this many (repeats hit caches)
  std::uint32_t output_tokens = 16;
  std::uint64_t seed = 42;
};

/// Chat requests with images: a group's system prompt, then a user turn of images and a
/// question. `image_ref(k)` names image k (a URL or a data URI).
[[nodiscard]] std::vector<request_spec> image_chats(const image_chat_options& options,
                                                    const std::function<std::string(std::size_t)>& image_ref);

/// Multi-turn text conversations: per group a system prompt of words, each conversation a user
/// question per turn, a later turn carrying the earlier answers (synthetic words, as the token-id
/// `turns` carry synthetic answers: the shared prefix, not the engine's words, is what routing
/// sees) and a new question. Sent to /v1/chat/completions, so router and engines render them
/// through the chat template and tokenizer as real clients' chats are. Turn by turn, the
/// conversations shuffled within a turn (seeded).
struct text_chat_options {
  std::uint32_t groups = 8;
  std::uint32_t conversations_per_group = 16;
  std::uint32_t system_words = 300;
  std::uint32_t question_words = 20;
  std::uint32_t answer_words = 16;
  std::uint32_t turns = 2;
  std::uint32_t output_tokens = 16;
  std::uint64_t seed = 42;
};

[[nodiscard]] std::vector<request_spec> text_chats(const text_chat_options& options);

/// Image k of an image workload: a valid one-colour PNG, 112 to 224 pixels a side.
[[nodiscard]] std::vector<std::uint8_t> workload_png(std::size_t k);

/// Poisson arrivals at `rate` per second (seeded), replacing `arrival_s`.
void poisson_arrivals(std::vector<request_spec>& requests, double rate, std::uint64_t seed);

/// Deterministic token ids of one trace block / synthetic segment (ids in [1000, 100000)).
void append_block_tokens(std::vector<std::uint32_t>& out, std::uint64_t key, std::uint32_t count);

/// The distinct KV blocks of `block_size` tokens the requests' token-id prompts span (blocks
/// identified by their chained hash, as an engine's prefix cache holds them): the working set a
/// cluster's caches would need to hold every prefix. Chat requests count nothing.
[[nodiscard]] std::size_t distinct_prompt_blocks(const std::vector<request_spec>& requests, std::uint32_t block_size);

}  // namespace kvr::loadgen
