// Tokenizer throughput on English prose (this repository's docs) and on code (its core/
// sources), one core, with a cold piece cache (a fresh one per pass) and a warm one.
// Target: >= 30 MB/s warm for Qwen3 on English. bench/tokenizer_compare.sh runs HuggingFace
// tokenizers on the same texts in the same run.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include "core/prompt/chat_template.hpp"
#include "core/prompt/tokenizer.hpp"

namespace kvr {
namespace {

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Every file under `dir` (recursively) with extension `ext`, concatenated (sorted, so the
/// text is stable).
std::string corpus(const std::string& dir, const std::string& ext) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir))
    if (entry.path().extension() == ext) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::string text;
  for (const auto& file : files) text += read(file);
  return text;
}

/// English prose that does not change with this repository: the licence texts every Debian
/// system carries (base-files), 155 KB.
std::string licence_prose() {
  std::string text;
  for (const char* name : {"GPL-3", "Apache-2.0", "MPL-2.0", "GFDL-1.3"}) text += read(std::string("/usr/share/common-licenses/") + name);
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

/// 0 = English prose (licence texts), 1 = this repository's docs (Markdown: prose, tables,
/// code), 2 = code (its core/ sources).
const std::string& text_of(int which) {
  static const std::string prose = licence_prose();
  static const std::string docs = corpus(std::string(KVR_SOURCE_DIR) + "/docs", ".md");
  static const std::string code = corpus(std::string(KVR_SOURCE_DIR) + "/core", ".cpp");
  return which == 0 ? prose : which == 1 ? docs : code;
}

const char* name_of(int which) { return which == 0 ? "prose" : which == 1 ? "docs" : "code"; }

/// Args: the text (see text_of); 0 = cold cache, 1 = warm.
void BM_qwen3_encode(benchmark::State& state) {
  const std::string& text = text_of(static_cast<int>(state.range(0)));
  const bool warm = state.range(1) != 0;
  tokenizer shared = qwen3().share();
  shared.enable_segment_cache(false);  // measure the piece cache alone (the text is one segment)
  std::vector<std::uint32_t> ids;
  if (warm) shared.encode(text, ids);
  for (auto _ : state) {
    ids.clear();
    if (warm) {
      shared.encode(text, ids);
    } else {
      tokenizer fresh = qwen3().share();  // an empty cache every pass
      fresh.enable_segment_cache(false);
      fresh.encode(text, ids);
    }
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(ids.size());
  state.counters["text_bytes"] = static_cast<double>(text.size());
  state.SetLabel(std::string(name_of(static_cast<int>(state.range(0)))) + (warm ? ", warm" : ", cold"));
}
BENCHMARK(BM_qwen3_encode)->ArgsProduct({{0, 1, 2}, {0, 1}})->Unit(benchmark::kMillisecond);

/// Pathological text an attacker can send (issue 40): one character class without a break, no
/// space at all, alternating scripts. Arg 0 picks the text, arg 1 its size in KiB; time per byte
/// must not grow with the size (the pre-tokenizer's pieces and BPE's merges stay linear).
std::string pathological(int which, std::size_t bytes) {
  std::string unit;
  switch (which) {
    case 0: unit = "a"; break;                                  // one letter: one piece as long as the text
    case 1: unit = "7"; break;                                  // digits: a piece per digit
    case 2: unit = "xq9Zk_Rb"; break;                           // letters, digits, punctuation, no space
    case 3: unit = "a\xd0\x96\xe4\xb8\xad\xd8\xa7" "1 "; break;   // Latin, Cyrillic, CJK, Arabic, digit, space
    case 5: unit = " "; break;                                  // spaces: one piece, merged into runs of spaces
    case 6: case 7: {  // one piece whose windows never repeat: spaces and tabs, or random letters
      std::string text;
      text.reserve(bytes);
      std::uint64_t state = 0x9E3779B97F4A7C15ULL;
      while (text.size() < bytes) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        text += which == 6 ? ((state >> 60) < 12 ? ' ' : '\t') : static_cast<char>('a' + (state >> 59) % 26);
      }
      return text;
    }
    default: unit = "\xf0\x9f\x98\x80"; break;                  // one emoji repeated: bytes no merge joins whole
  }
  std::string text;
  text.reserve(bytes + unit.size());
  while (text.size() < bytes) text += unit;
  return text;
}

const char* pathological_name(int which) {
  static const char* names[] = {"one letter", "digits", "no space", "alternating scripts", "emoji", "spaces",
                                 "spaces and tabs at random", "random letters"};
  return names[which];
}

void BM_qwen3_encode_pathological(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  const std::string text = pathological(which, static_cast<std::size_t>(state.range(1)) << 10);
  std::vector<std::uint32_t> ids;
  qwen3();  // loaded before the timing, which a first benchmark's one iteration would hold
  for (auto _ : state) {
    tokenizer fresh = qwen3().share();  // cold: an attacker's text is new every time
    ids.clear();
    fresh.encode(text, ids);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(ids.size());
  state.SetLabel(std::string(pathological_name(which)) + ", " + std::to_string(state.range(1)) + " KiB");
}
BENCHMARK(BM_qwen3_encode_pathological)->ArgsProduct({{0, 1, 2, 3, 4, 5, 6, 7}, {256, 1024, 4096}})->Unit(benchmark::kMillisecond);

/// A growing conversation, as a chat client sends it: turn n resends the system prompt and all
/// n - 1 earlier exchanges plus a new question. Each turn is rendered with Qwen3's chat template
/// and tokenized, as the hasher does. Arg: 0 = segment cache off (every message re-tokenized,
/// pieces still cached), 1 = on (earlier messages' ids reused). Both start warm: the same
/// conversation was seen once before the timing, as a hasher sees a chat's turns again and again.
void BM_qwen3_multi_turn_chat(benchmark::State& state) {
  constexpr int turns = 8;
  const std::string& prose = text_of(0);
  auto chat = chat_template::load(std::string(KVR_SOURCE_DIR) + "/.cache/tokenizers/qwen3/tokenizer_config.json");
  if (!chat) throw std::runtime_error(chat.error());
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  messages.push_back({{"role", "system"}, {"content", prose.substr(0, 2000)}});
  std::vector<std::string> requests;  // the messages JSON of each turn
  std::size_t offset = 2000;
  for (int turn = 0; turn < turns; ++turn) {
    messages.push_back({{"role", "user"}, {"content", prose.substr(offset, 800)}});
    requests.push_back(messages.dump());
    messages.push_back({{"role", "assistant"}, {"content", prose.substr(offset + 800, 600)}});
    offset += 1400;
  }
  tokenizer t = qwen3().share();
  t.enable_segment_cache(state.range(0) != 0);
  std::vector<std::uint32_t> ids;
  std::size_t bytes = 0;
  auto one_conversation = [&] {
    for (const std::string& request : requests) {
      const std::string prompt = *chat->render({.messages_json = request});
      ids.clear();
      t.encode(prompt, ids);
      bytes += prompt.size();
    }
  };
  one_conversation();
  bytes = 0;
  for (auto _ : state) {
    one_conversation();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  state.counters["us_per_turn"] =
      benchmark::Counter(static_cast<double>(state.iterations() * turns), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["last_turn_tokens"] = static_cast<double>(ids.size());
  state.SetLabel(state.range(0) != 0 ? "segment cache on" : "segment cache off");
}
BENCHMARK(BM_qwen3_multi_turn_chat)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

/// Rendering alone (Qwen3's chat template, no tokenizing) of the chats an attacker can shape and
/// of an ordinary one. Arg: 0 = a system prompt and 8 turns of prose (9.4 KB), 1 = one message of
/// 4 MB of prose, 2 = 10^5 messages of one letter (3 MB), 3 = one message with 10^5 extra keys
/// (1.2 MB; read key by key into ordered trees it was quadratic). What the render costs per byte
/// of messages is the figure: it should stay flat across the shapes.
void BM_qwen3_render(benchmark::State& state) {
  auto chat = chat_template::load(std::string(KVR_SOURCE_DIR) + "/.cache/tokenizers/qwen3/tokenizer_config.json");
  if (!chat) throw std::runtime_error(chat.error());
  const std::string& prose = text_of(0);
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  switch (state.range(0)) {
    case 0:
      messages.push_back({{"role", "system"}, {"content", prose.substr(0, 2000)}});
      for (std::size_t turn = 0, offset = 2000; turn < 8; ++turn, offset += 1400) {
        messages.push_back({{"role", "user"}, {"content", prose.substr(offset, 800)}});
        messages.push_back({{"role", "assistant"}, {"content", prose.substr(offset + 800, 600)}});
      }
      state.SetLabel("a chat of 8 turns");
      break;
    case 1: {
      std::string text;
      while (text.size() < (4u << 20)) text += prose.substr(0, std::min<std::size_t>(prose.size(), (4u << 20) - text.size()));
      messages.push_back({{"role", "user"}, {"content", text}});
      state.SetLabel("one message of 4 MB");
      break;
    }
    case 2:
      for (int i = 0; i < 100000; ++i) messages.push_back({{"role", "user"}, {"content", "a"}});
      state.SetLabel("10^5 tiny messages");
      break;
    default: state.SetLabel("one message of 10^5 keys");  // written as text: ordered_json is quadratic in them
  }
  std::string request = messages.dump();
  if (state.range(0) == 3) {
    request = R"([{"role":"user","content":"hi")";
    for (int i = 0; i < 100000; ++i) request += ",\"k" + std::to_string(i) + "\":" + std::to_string(i);
    request += "}]";
  }
  for (auto _ : state) {
    auto prompt = chat->render({.messages_json = request});
    benchmark::DoNotOptimize(prompt->data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * request.size()));
}
BENCHMARK(BM_qwen3_render)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kvr
