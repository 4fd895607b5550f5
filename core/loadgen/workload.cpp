#include "core/loadgen/workload.hpp"

#include <algorithm>
#include <functional>
#include <cmath>
#include <random>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/common/json_parse.hpp"
#include "core/kv/block_hash.hpp"
#include "core/loadgen/lru_block_cache.hpp"

namespace kvr::loadgen {

namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// Calls `row(line_number, object)` per non-empty line; stops at the first error.
template <class Row>
std::expected<void, std::string> for_each_row(std::string_view jsonl, std::size_t max_rows, Row&& row) {
  std::size_t start = 0, line = 0, rows = 0;
  while (start < jsonl.size() && (max_rows == 0 || rows < max_rows)) {
    std::size_t end = jsonl.find('\n', start);
    if (end == std::string_view::npos) end = jsonl.size();
    ++line;
    const std::string_view text = jsonl.substr(start, end - start);
    start = end + 1;
    if (text.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const auto object = parse_plain_json(text);
    if (object.is_discarded() || !object.is_object()) return std::unexpected("line " + std::to_string(line) + ": not a JSON object");
    if (auto done = row(line, object); !done) return done;
    ++rows;
  }
  return {};
}

}  // namespace

void append_block_tokens(std::vector<std::uint32_t>& out, std::uint64_t key, std::uint32_t count) {
  std::uint64_t state = key * 0x2545f4914f6cdd1dull + 1;
  for (std::uint32_t i = 0; i < count; ++i) out.push_back(1000 + static_cast<std::uint32_t>(splitmix64(state) % 99000));
}

std::expected<std::vector<request_spec>, std::string> mooncake_trace(std::string_view jsonl, const trace_options& options) {
  std::vector<request_spec> requests;
  auto parsed = for_each_row(jsonl, options.max_requests, [&](std::size_t line, const nlohmann::json& row) -> std::expected<void, std::string> {
    const auto bad = [&](const char* what) { return std::unexpected("line " + std::to_string(line) + ": " + what); };
    if (!row.contains("timestamp") || !row["timestamp"].is_number()) return bad("needs a numeric timestamp (ms)");
    if (!row.contains("input_length") || !row["input_length"].is_number_unsigned()) return bad("needs input_length");
    if (!row.contains("output_length") || !row["output_length"].is_number_unsigned()) return bad("needs output_length");
    if (!row.contains("hash_ids") || !row["hash_ids"].is_array()) return bad("needs hash_ids");
    request_spec r;
    r.arrival_s = row["timestamp"].get<double>() / 1000.0 / options.speedup;
    const auto input = row["input_length"].get<std::uint64_t>();
    for (const auto& id : row["hash_ids"]) {
      if (!id.is_number_unsigned()) return bad("hash_ids must be non-negative integers");
      if (r.prompt.size() >= input) break;
      append_block_tokens(r.prompt, id.get<std::uint64_t>(),
                          static_cast<std::uint32_t>(std::min<std::uint64_t>(options.block_tokens, input - r.prompt.size())));
    }
    // Inputs longer than their hash ids cover get unique filler (no reuse can be claimed for it).
    if (r.prompt.size() < input)
      append_block_tokens(r.prompt, 0xf111e7ull * 1000003 + line, static_cast<std::uint32_t>(input - r.prompt.size()));
    if (r.prompt.empty()) return bad("empty prompt");
    r.max_tokens = std::max<std::uint32_t>(1, static_cast<std::uint32_t>(row["output_length"].get<std::uint64_t>()));
    if (options.max_output_tokens > 0) r.max_tokens = std::min(r.max_tokens, options.max_output_tokens);
    requests.push_back(std::move(r));
    return {};
  });
  if (!parsed) return std::unexpected(parsed.error());
  std::stable_sort(requests.begin(), requests.end(), [](const auto& a, const auto& b) { return a.arrival_s < b.arrival_s; });
  return requests;
}

std::expected<double, std::string> trace_reuse_ceiling(std::string_view jsonl, std::size_t max_requests) {
  std::unordered_set<std::uint64_t> seen;
  std::uint64_t total = 0, reused = 0;
  auto parsed = for_each_row(jsonl, max_requests, [&](std::size_t line, const nlohmann::json& row) -> std::expected<void, std::string> {
    if (!row.contains("hash_ids") || !row["hash_ids"].is_array()) return std::unexpected("line " + std::to_string(line) + ": needs hash_ids");
    for (const auto& id : row["hash_ids"]) {
      ++total;
      reused += seen.insert(id.get<std::uint64_t>()).second ? 0 : 1;
    }
    return {};
  });
  if (!parsed) return std::unexpected(parsed.error());
  return total == 0 ? 0.0 : static_cast<double>(reused) / static_cast<double>(total);
}

std::expected<cache_bounds, std::string> trace_cache_bounds(std::string_view jsonl, const cache_bound_options& o) {
  if (o.engines == 0 || o.block_size == 0 || o.block_tokens == 0 || o.block_tokens % o.block_size != 0)
    return std::unexpected("a hash id's tokens must be whole blocks, and there must be engines");
  struct row_blocks {
    double timestamp = 0;
    std::uint64_t tokens = 0;
    std::vector<std::uint64_t> blocks;  ///< full blocks' keys, in prompt order
  };
  const std::uint64_t per_id = o.block_tokens / o.block_size;
  std::vector<row_blocks> rows;
  std::uint64_t filler = 0;
  auto parsed = for_each_row(jsonl, o.max_requests, [&](std::size_t line, const nlohmann::json& row) -> std::expected<void, std::string> {
    const auto bad = [&](const char* what) { return std::unexpected("line " + std::to_string(line) + ": " + what); };
    if (!row.contains("timestamp") || !row["timestamp"].is_number()) return bad("needs a numeric timestamp (ms)");
    if (!row.contains("input_length") || !row["input_length"].is_number_unsigned()) return bad("needs input_length");
    if (!row.contains("hash_ids") || !row["hash_ids"].is_array()) return bad("needs hash_ids");
    row_blocks r{.timestamp = row["timestamp"].get<double>(), .tokens = row["input_length"].get<std::uint64_t>(), .blocks = {}};
    std::uint64_t covered = 0;
    for (const auto& id : row["hash_ids"]) {
      if (!id.is_number_unsigned() || id.get<std::uint64_t>() >= (std::uint64_t{1} << 48))
        return bad("hash_ids must be integers in 0..2^48");
      if (covered >= r.tokens) break;
      const std::uint64_t tokens = std::min<std::uint64_t>(o.block_tokens, r.tokens - covered);
      for (std::uint64_t b = 0; b < tokens / o.block_size; ++b) r.blocks.push_back(id.get<std::uint64_t>() * per_id + b);
      covered += tokens;
    }
    // Unique filler past the hash ids: it takes room and never hits.
    for (std::uint64_t b = 0; covered + (b + 1) * o.block_size <= r.tokens; ++b) r.blocks.push_back((std::uint64_t{1} << 62) + filler++);
    rows.push_back(std::move(r));
    return {};
  });
  if (!parsed) return std::unexpected(parsed.error());
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.timestamp < b.timestamp; });

  cache_bounds out;
  lru_block_cache unbounded(0), pooled(o.engines * o.engine_blocks);
  std::vector<lru_block_cache> engines(o.engines, lru_block_cache(o.engine_blocks));
  std::uint64_t unbounded_hits = 0, pooled_hits = 0, round_robin_hits = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const row_blocks& r = rows[i];
    out.prompt_tokens += r.tokens;
    // A hit never covers more than the prompt (its last token is the engine's to compute).
    const auto tokens_of = [&](std::uint32_t blocks) { return std::min<std::uint64_t>(blocks * std::uint64_t{o.block_size}, r.tokens); };
    unbounded_hits += tokens_of(unbounded.serve(r.blocks));
    pooled_hits += tokens_of(pooled.serve(r.blocks));
    round_robin_hits += tokens_of(engines[i % o.engines].serve(r.blocks));
  }
  out.requests = rows.size();
  out.distinct_blocks = unbounded.size();
  if (out.prompt_tokens > 0) {
    const auto share = [&](std::uint64_t hits) { return static_cast<double>(hits) / static_cast<double>(out.prompt_tokens); };
    out.unbounded = share(unbounded_hits);
    out.pooled = share(pooled_hits);
    out.round_robin = share(round_robin_hits);
  }
  return out;
}

namespace {

/// Visits `conversations` turn by turn, each turn's conversations in a seeded shuffled order
/// (so a conversation's turns stay in order while turns of different ones interleave).
void for_each_turn(std::size_t conversations, std::uint32_t turns, std::uint64_t seed,
                   const std::function<void(std::uint32_t turn, std::size_t conversation)>& visit) {
  std::mt19937_64 random(seed);
  std::vector<std::size_t> order(conversations);
  for (std::uint32_t turn = 0; turn < std::max<std::uint32_t>(turns, 1); ++turn) {
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), random);
    for (std::size_t c : order) visit(turn, c);
  }
}

}  // namespace

std::vector<request_spec> shared_prefix(const shared_prefix_options& o) {
  struct conversation {
    std::vector<std::uint32_t> history;
  };
  std::vector<conversation> conversations(static_cast<std::size_t>(o.groups) * o.prompts_per_group);
  for (std::uint32_t g = 0; g < o.groups; ++g)
    for (std::uint32_t p = 0; p < o.prompts_per_group; ++p)
      append_block_tokens(conversations[g * o.prompts_per_group + p].history, o.seed * 7919 + g, o.system_tokens);
  std::vector<request_spec> out;
  for_each_turn(conversations.size(), o.turns, o.seed, [&](std::uint32_t turn, std::size_t c) {
    conversation& conv = conversations[c];
    if (turn > 0) append_block_tokens(conv.history, (o.seed << 32) ^ (c * 131 + turn) ^ 0xa5a5, o.output_tokens);  // the answer
    append_block_tokens(conv.history, (o.seed << 40) ^ (c * 1009 + turn), o.question_tokens);
    out.push_back({.arrival_s = 0.0, .prompt = conv.history, .max_tokens = o.output_tokens});
  });
  return out;
}

namespace {

std::uint32_t crc32(const std::uint8_t* data, std::size_t size, std::uint32_t crc = 0) {
  crc = ~crc;
  for (std::size_t i = 0; i < size; ++i) {
    crc ^= data[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

void put_u32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
}

void png_chunk(std::vector<std::uint8_t>& out, const char* type, const std::vector<std::uint8_t>& data) {
  put_u32(out, static_cast<std::uint32_t>(data.size()));
  const std::size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  put_u32(out, crc32(out.data() + start, out.size() - start));
}

}  // namespace

std::vector<std::uint8_t> workload_png(std::size_t k) {
  const std::uint32_t width = 112 + 28 * static_cast<std::uint32_t>(k % 5);
  const std::uint32_t height = 112 + 28 * static_cast<std::uint32_t>((k / 5) % 5);
  const auto shade = static_cast<std::uint8_t>(k * 37);
  // Raw scanlines (filter byte 0, then RGB), wrapped in a zlib stream of stored deflate blocks.
  std::vector<std::uint8_t> raw;
  for (std::uint32_t y = 0; y < height; ++y) {
    raw.push_back(0);
    for (std::uint32_t x = 0; x < width; ++x) raw.insert(raw.end(), {shade, static_cast<std::uint8_t>(255 - shade), 128});
  }
  std::vector<std::uint8_t> zlib = {0x78, 0x01};
  for (std::size_t at = 0; at < raw.size(); at += 65535) {
    const auto n = static_cast<std::uint16_t>(std::min<std::size_t>(65535, raw.size() - at));
    zlib.push_back(at + n >= raw.size() ? 1 : 0);
    zlib.insert(zlib.end(), {static_cast<std::uint8_t>(n), static_cast<std::uint8_t>(n >> 8),
                             static_cast<std::uint8_t>(~n), static_cast<std::uint8_t>(~n >> 8)});
    zlib.insert(zlib.end(), raw.begin() + static_cast<std::ptrdiff_t>(at), raw.begin() + static_cast<std::ptrdiff_t>(at + n));
  }
  std::uint32_t a = 1, b = 0;
  for (std::uint8_t byte : raw) {
    a = (a + byte) % 65521;
    b = (b + a) % 65521;
  }
  put_u32(zlib, (b << 16) | a);
  std::vector<std::uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<std::uint8_t> header;
  put_u32(header, width);
  put_u32(header, height);
  header.insert(header.end(), {8, 2, 0, 0, 0});
  png_chunk(png, "IHDR", header);
  png_chunk(png, "IDAT", zlib);
  png_chunk(png, "IEND", {});
  return png;
}

namespace {

/// `count` words drawn from 5000 ("w17 w4242 ..."), the same for the same key.
std::string words(std::uint64_t key, std::uint32_t count) {
  std::uint64_t state = key;
  std::string text;
  for (std::uint32_t i = 0; i < count; ++i) text += (i ? " w" : "w") + std::to_string(splitmix64(state) % 5000);
  return text;
}

}  // namespace

std::vector<request_spec> text_chats(const text_chat_options& o) {
  std::vector<nlohmann::json> conversations;
  for (std::uint32_t g = 0; g < o.groups; ++g) {
    const std::string system = words(o.seed * 31 + g, o.system_words);
    for (std::uint32_t c = 0; c < o.conversations_per_group; ++c)
      conversations.push_back(nlohmann::json::array({{{"role", "system"}, {"content", system}}}));
  }
  std::vector<request_spec> out;
  for_each_turn(conversations.size(), o.turns, o.seed, [&](std::uint32_t turn, std::size_t c) {
    nlohmann::json& messages = conversations[c];
    if (turn > 0) messages.push_back({{"role", "assistant"}, {"content", words((o.seed << 32) ^ (c * 131 + turn) ^ 0xa5a5, o.answer_words)}});
    messages.push_back({{"role", "user"}, {"content", words((o.seed << 40) ^ (c * 1009 + turn), o.question_words)}});
    request_spec r;
    r.messages_json = messages.dump();
    r.max_tokens = o.output_tokens;
    out.push_back(std::move(r));
  });
  return out;
}

std::vector<request_spec> image_chats(const image_chat_options& o, const std::function<std::string(std::size_t)>& image_ref) {
  std::mt19937_64 random(o.seed);
  std::vector<request_spec> out;
  for (std::uint32_t g = 0; g < o.groups; ++g) {
    const std::string system = words(o.seed * 31 + g, o.system_words);
    for (std::uint32_t p = 0; p < o.prompts_per_group; ++p) {
      nlohmann::json content = nlohmann::json::array();
      for (std::uint32_t i = 0; i < o.images_per_request; ++i)
        content.push_back({{"type", "image_url"}, {"image_url", {{"url", image_ref(random() % std::max<std::uint32_t>(o.distinct_images, 1))}}}});
      content.push_back({{"type", "text"}, {"text", words((o.seed << 20) ^ (g * 1000 + p), o.question_words)}});
      const nlohmann::json messages = {{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", content}}};
      request_spec r;
      r.messages_json = messages.dump();
      r.max_tokens = o.output_tokens;
      out.push_back(std::move(r));
    }
  }
  std::shuffle(out.begin(), out.end(), random);
  return out;
}

void poisson_arrivals(std::vector<request_spec>& requests, double rate, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::exponential_distribution<double> gap(rate);
  double t = 0;
  for (request_spec& r : requests) {
    r.arrival_s = t;
    t += gap(random);
  }
}

std::size_t distinct_prompt_blocks(const std::vector<request_spec>& requests, std::uint32_t block_size) {
  std::unordered_set<std::uint64_t> blocks;
  std::vector<std::uint64_t> local, sequence;
  for (const request_spec& r : requests) {
    compute_local_hashes(r.prompt, block_size, {}, {}, local);
    compute_sequence_hashes(local, sequence);
    blocks.insert(sequence.begin(), sequence.end());
  }
  return blocks.size();
}

}  // namespace kvr::loadgen
