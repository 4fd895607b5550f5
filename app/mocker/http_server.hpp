#pragma once
/// The simulated engine's HTTP server (Boost.Beast): vLLM's OpenAI routes plus the mocker's own.
///
///   POST /v1/completions, /v1/chat/completions   streaming (SSE) or not
///   GET  /v1/models, /health, /metrics           vLLM-style metric names
///   GET  /mocker/cache                           the true cache contents of every rank
///   POST /mocker/restart                         an engine restart (KV-event sequence back to 0)
///   POST /mocker/faults {"drop_batches_pct": P, ...}  KV-event drops and stream faults at run time
///   GET  /mocker/kv_transfer/ID                  a prefill worker's leased blocks (vLLM disaggregated serving)
///   GET  /mocker/bootstrap/ROOM                  a prefill worker's blocks of an SGLang room, once prefilled
///   GET  /mocker/pd                              what the disaggregated roles did (counts, last params)

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "app/mocker/engine_loop.hpp"
#include "app/mocker/openai_mock.hpp"

namespace kvr::mocker {

struct server_settings {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8000;
  std::string model = "mock-model";
  std::size_t threads = 1;
  /// Disaggregated serving: `prefill` answers a prefill leg with transfer params, `decode`
  /// pulls a prefill worker's blocks, `both` does either (and aggregated requests).
  std::string role = "both";
  std::string pd = "vllm-nixl";  ///< the disaggregation protocol spoken: vllm-nixl or sglang
  /// SGLang prefill workers: the bootstrap server's port (`GET /mocker/bootstrap/ROOM`), 0 = any.
  std::uint16_t bootstrap_port = 8998;
  std::chrono::seconds kv_lease{30};  ///< how long a prefill worker holds a prompt's blocks for its decode worker
  std::uint32_t block_size = 16;      ///< for the transfer's block hashes
  /// The process exits once one request has streamed (or, not streamed, generated) this many
  /// tokens, as an engine killed mid-answer; 0 = never.
  std::uint32_t die_after_tokens = 0;
  /// `return_token_ids` is honoured (vLLM 0.10.2+); false answers as SGLang's OpenAI API and
  /// older vLLM do, with text alone.
  bool token_ids = true;
  /// `usage.prompt_tokens_details.cached_tokens`, as vLLM reports it with
  /// `--enable-prompt-tokens-details`.
  bool prompt_tokens_details = false;
};

class http_server {
 public:
  /// Binds at once (throws on failure); `ranks` and `prompts` must outlive the server.
  http_server(server_settings settings, std::vector<std::unique_ptr<engine_loop>>& ranks, const prompt_tokenizer& prompts);
  ~http_server();
  [[nodiscard]] std::uint16_t port() const;
  /// The bootstrap server's port (SGLang prefill workers), 0 when there is none.
  [[nodiscard]] std::uint16_t bootstrap_port() const;
  /// Serves until stop() (callable from a signal-watching thread).
  void run();
  void stop();

  struct impl;  ///< (the sessions of http_server.cpp use it)

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace kvr::mocker
