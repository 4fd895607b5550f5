// Tokenizer throughput on English prose (this repository's docs) and on code (its core/
// sources), one core, with a cold piece cache (a fresh one per pass) and a warm one.
// Target: >= 30 MB/s warm for Qwen3 on English. bench/tokenizer_compare.sh runs HuggingFace
// tokenizers on the same texts in the same run.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <benchmark/benchmark.h>

#include "core/tokenizer.hpp"

namespace kvr {
namespace {

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Every file of `dir` with extension `ext`, concatenated (sorted, so the text is stable).
std::string corpus(const std::string& dir, const std::string& ext) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(KVR_SOURCE_DIR) + "/" + dir))
    if (entry.path().extension() == ext) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::string text;
  for (const auto& file : files) text += read(file);
  return text;
}

tokenizer& qwen3() {
  static tokenizer loaded = [] {
    auto t = tokenizer::from_json(read(std::string(KVR_SOURCE_DIR) + "/.cache/tokenizers/qwen3/tokenizer.json"));
    if (!t) throw std::runtime_error(t.error().message);
    return std::move(*t);
  }();
  return loaded;
}

const std::string& text_of(int which) {
  static const std::string prose = corpus("docs", ".md");
  static const std::string code = corpus("core", ".cpp");
  return which == 0 ? prose : code;
}

/// Args: 0 = English prose, 1 = code; 0 = cold cache, 1 = warm.
void BM_qwen3_encode(benchmark::State& state) {
  const std::string& text = text_of(static_cast<int>(state.range(0)));
  const bool warm = state.range(1) != 0;
  tokenizer shared = qwen3().share();
  std::vector<std::uint32_t> ids;
  if (warm) shared.encode(text, ids);
  for (auto _ : state) {
    ids.clear();
    if (warm) {
      shared.encode(text, ids);
    } else {
      tokenizer fresh = qwen3().share();  // an empty cache every pass
      fresh.encode(text, ids);
    }
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(ids.size());
  state.counters["text_bytes"] = static_cast<double>(text.size());
  state.SetLabel(std::string(state.range(0) == 0 ? "prose" : "code") + (warm ? ", warm" : ", cold"));
}
BENCHMARK(BM_qwen3_encode)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kvr
