// What following a streamed answer for migration costs per event (core/migration): reading the
// SSE bytes, the ledger's parse, and stripping the token ids kvrouter asked for; beside it, the
// bytes merely read (what a stream that is not followed costs here: nothing but the copy).
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/migration/answer_ledger.hpp"
#include "core/migration/continuation.hpp"
#include "core/migration/sse_events.hpp"

namespace {

/// `tokens` vLLM chat chunks with token ids, one token each, as an engine streams them.
std::string vllm_stream(int tokens) {
  std::string out =
      R"(data: {"id":"chatcmpl-0123456789abcdef","object":"chat.completion.chunk","created":1767225600,"model":"Qwen/Qwen3-8B",)"
      R"("prompt_token_ids":[151644,872,198,9707,11,1879,0,151645,198,151644,77091,198],)"
      R"("choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null,"token_ids":[]}]})"
      "\n\n";
  for (int i = 0; i < tokens; ++i)
    out += R"(data: {"id":"chatcmpl-0123456789abcdef","object":"chat.completion.chunk","created":1767225600,"model":"Qwen/Qwen3-8B",)"
           R"("choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null,"token_ids":[)" +
           std::to_string(1000 + i) + "]}]}\n\n";
  return out + "data: [DONE]\n\n";
}

constexpr int stream_tokens = 256;

void BM_follow_stream_for_migration(benchmark::State& state) {
  const std::string stream = vllm_stream(stream_tokens);
  const bool strip = state.range(0) != 0;
  for (auto _ : state) {
    kvr::sse_reader reader;
    kvr::answer_ledger ledger;
    std::string out;
    for (std::size_t at = 0; at < stream.size(); at += 512)  // as reads bring it
      reader.feed(std::string_view(stream).substr(at, 512), [&](std::string_view data) {
        ledger.observe(data);
        out += strip && data != "[DONE]" ? kvr::without_token_ids(data) : std::string(data);
      });
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations() * (stream_tokens + 2));  // events: items_per_second
}
BENCHMARK(BM_follow_stream_for_migration)->Arg(0)->Arg(1)->ArgName("strip");

void BM_stream_bytes_only(benchmark::State& state) {
  const std::string stream = vllm_stream(stream_tokens);
  for (auto _ : state) {
    std::string out;
    for (std::size_t at = 0; at < stream.size(); at += 512) out.append(std::string_view(stream).substr(at, 512));
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_stream_bytes_only);

}  // namespace
