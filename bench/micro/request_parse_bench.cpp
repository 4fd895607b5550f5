// Reading a completion whose prompt is 4096 token ids (25 KB, the proxy benchmark's body), the
// way a kv set reads it: `parse` (the token-id shortcut) against `parse_walking` (simdjson over
// the whole body, what every body took before the shortcut), compact and with Python's
// default ", " separators.
#include <benchmark/benchmark.h>

#include <random>
#include <string>

#include "core/prompt/openai.hpp"

namespace kvr::bench {
namespace {

std::string completion_body(const char* separator) {
  std::mt19937 rng(4096);
  std::string body = R"({"model":"m","prompt":[)";
  for (int i = 0; i < 4096; ++i) body += (i ? separator : "") + std::to_string(rng() % 150000);
  body += R"(],"max_tokens":16})";
  return body;
}

/// Args: 0 compact, 1 ", "; 0 parse, 1 parse_walking.
void BM_completion_token_ids(benchmark::State& state) {
  std::string body = completion_body(state.range(0) == 0 ? "," : ", ");
  const std::size_t size = body.size();
  body.reserve(size + request_parser::padding);
  request_parser parser;
  const auto method = state.range(1) == 0 ? &request_parser::parse : &request_parser::parse_walking;
  for (auto _ : state) {
    auto request = (parser.*method)(api_endpoint::completions, std::string_view(body.data(), size), body.capacity());
    if (!request || request->prompt_token_ids.size() != 4096) state.SkipWithError("not read");
    benchmark::DoNotOptimize(request);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * size));
}
BENCHMARK(BM_completion_token_ids)->ArgsProduct({{0, 1}, {0, 1}});

}  // namespace
}  // namespace kvr::bench
