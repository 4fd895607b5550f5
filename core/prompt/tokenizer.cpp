#include "core/prompt/tokenizer.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <unordered_map>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <pcre2.h>
#include <utf8proc.h>
#include <xxhash.h>

#include "core/common/flat_u64_map.hpp"
#include "core/common/json_parse.hpp"
#include "core/prompt/bpe_merge.hpp"
#include "core/prompt/piece_cache.hpp"
#include "core/prompt/pretokenizer.hpp"
#include "core/prompt/segment_cache.hpp"

namespace kvr {
namespace {

using json = nlohmann::json;

/// A piece's ids are kept between pieces up to this many (4 MiB of them); a huge word's are let go.
constexpr std::size_t kept_symbols = std::size_t{1} << 20;

std::unexpected<tokenizer_error> fail(std::string message) { return std::unexpected(tokenizer_error{std::move(message)}); }

/// GPT-2's byte-to-unicode table: printable bytes stand for themselves, the others for code
/// points from 256 up. Returns, per code point below 512, the byte it stands for (or -1).
std::array<int, 512> unicode_to_byte() {
  std::array<int, 512> table;
  table.fill(-1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    table[static_cast<std::size_t>(printable ? b : next++)] = b;
  }
  return table;
}

/// A vocab string (byte-level unicode) back to the raw bytes it stands for; nullopt if it holds
/// a code point outside the byte-level alphabet.
std::optional<std::string> to_raw_bytes(std::string_view token, const std::array<int, 512>& table) {
  std::string raw;
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(token.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(token.size());
  while (left > 0) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0 || cp < 0 || cp >= 512 || table[static_cast<std::size_t>(cp)] < 0) return std::nullopt;
    raw.push_back(static_cast<char>(table[static_cast<std::size_t>(cp)]));
    p += n;
    left -= n;
  }
  return raw;
}

/// NFC of `text` into `out`; false (and `out` untouched) when `text` is already NFC by the
/// quick test below. Only non-ASCII runs holding a code point from U+0300 up can change (code
/// points below never decompose under NFC and never compose with what precedes them), and a
/// boundary before an ASCII character is always stable, so each such run is normalized with
/// the one character before it, and the rest is copied.
bool nfc_into(std::string_view text, std::string& out) {
  bool changed = false;
  std::size_t copied = 0;
  for (std::size_t i = 0; i < text.size();) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    std::size_t end = i;
    bool may_change = false;
    while (end < text.size() && static_cast<unsigned char>(text[end]) >= 0x80) {
      // A lead byte of U+0300 or above: 0xCC..0xDF (two bytes from U+0300) or 0xE0 and up.
      may_change |= static_cast<unsigned char>(text[end]) >= 0xCC;
      ++end;
    }
    if (may_change) {
      const std::size_t start = i > 0 ? i - 1 : i;  // the character a combining mark may join
      if (!changed) {
        out.clear();
        changed = true;
      }
      out.append(text.substr(copied, start - copied));
      utf8proc_uint8_t* normalized = nullptr;
      const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + start),
                                              static_cast<utf8proc_ssize_t>(end - start), &normalized,
                                              static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
      if (n >= 0) out.append(reinterpret_cast<const char*>(normalized), static_cast<std::size_t>(n));
      else out.append(text.substr(start, end - start));  // invalid UTF-8: kept as is
      std::free(normalized);
      copied = end;
    }
    i = end;
  }
  if (changed) out.append(text.substr(copied));
  return changed;
}

/// The special tokens a post-processor adds around one sequence: TemplateProcessing's
/// `single` template (directly or inside a Sequence of processors); ByteLevel and the rest add
/// none.
std::expected<tokenizer::special_affixes, std::string> read_post_processor(const nlohmann::json& processor) {
  tokenizer::special_affixes affixes;
  if (!processor.is_object()) return affixes;
  const std::string type = processor.value("type", "");
  if (type == "Sequence") {
    for (const nlohmann::json& inner : processor.value("processors", nlohmann::json::array())) {
      auto more = read_post_processor(inner);
      if (!more) return more;
      affixes.prefix.insert(affixes.prefix.end(), more->prefix.begin(), more->prefix.end());
      affixes.suffix.insert(affixes.suffix.end(), more->suffix.begin(), more->suffix.end());
    }
    return affixes;
  }
  if (type != "TemplateProcessing") return affixes;
  const nlohmann::json& specials = processor.value("special_tokens", nlohmann::json::object());
  bool after_sequence = false;
  for (const nlohmann::json& item : processor.value("single", nlohmann::json::array())) {
    if (item.contains("Sequence")) {
      after_sequence = true;
      continue;
    }
    const std::string name = item.value("SpecialToken", nlohmann::json::object()).value("id", "");
    const auto special = specials.find(name);
    if (special == specials.end() || !special->contains("ids"))
      return std::unexpected("post_processor: special token \"" + name + "\" has no ids");
    for (const nlohmann::json& id : special->at("ids")) (after_sequence ? affixes.suffix : affixes.prefix).push_back(id.get<std::uint32_t>());
  }
  return affixes;
}

/// Appends `bytes` to `out` as UTF-8, each invalid sequence replaced by U+FFFD: the longest
/// prefix of a valid sequence counts as one (Unicode's "maximal subparts", as Rust's
/// `String::from_utf8_lossy` and so HF `tokenizers` replace them).
void append_utf8_lossy(std::string_view bytes, std::string& out) {
  static constexpr std::string_view replacement = "\xEF\xBF\xBD";
  auto continuation = [](unsigned char c) { return c >= 0x80 && c <= 0xBF; };
  std::size_t i = 0;
  while (i < bytes.size()) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    if (b < 0x80) {
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    const std::size_t width = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
    std::size_t valid = 1;  // bytes of a valid sequence's prefix seen
    if (width > 0 && i + 1 < bytes.size()) {
      const auto c = static_cast<unsigned char>(bytes[i + 1]);
      const bool second = width == 2   ? continuation(c)
                          : b == 0xE0  ? c >= 0xA0 && c <= 0xBF
                          : b == 0xED  ? c >= 0x80 && c <= 0x9F
                          : b == 0xF0  ? c >= 0x90 && c <= 0xBF
                          : b == 0xF4  ? c >= 0x80 && c <= 0x8F
                                       : continuation(c);
      if (second) {
        valid = 2;
        while (valid < width && i + valid < bytes.size() && continuation(static_cast<unsigned char>(bytes[i + valid]))) ++valid;
      }
    }
    if (width > 0 && valid == width) {
      out.append(bytes.substr(i, width));
    } else {
      out.append(replacement);
    }
    i += width > 0 && valid == width ? width : valid;
  }
}

}  // namespace

struct tokenizer::tables {
  bpe_byte_tokens byte_token{};
  bpe_merges merges;
  bool ignore_merges = false;
  std::unordered_map<std::string, std::uint32_t> vocab_by_bytes;  ///< only with ignore_merges
  std::size_t vocab_size = 0;
  struct added {
    std::string content;
    std::uint32_t id;
  };
  std::vector<added> added_tokens;  ///< longest first
  std::string added_first_bytes;    ///< the distinct first bytes of added_tokens
  /// Each id's bytes for decoding (the byte-level symbols mapped back; a token with a code point
  /// outside that alphabet, such as an added token with a space, as its own UTF-8).
  std::vector<std::string> token_bytes;
  std::vector<bool> special;  ///< special added tokens, left out by decode(skip_special_tokens)
  std::vector<bool> known;    ///< ids the vocabulary or the added tokens define
  special_affixes affixes;
  bool nfc = false;
  /// The pre-tokenizer: one of the known patterns, matched by hand (core/prompt/pretokenizer),
  /// or any other regex through PCRE2.
  std::optional<split_pattern> split;
  pcre2_code* pattern = nullptr;

  ~tables() {
    if (pattern) pcre2_code_free(pattern);
  }
};

struct tokenizer::cache {
  piece_cache pieces;
  pcre2_match_data* match = nullptr;
  std::vector<std::uint32_t> symbols;
  bpe_scratch merge_scratch;
  std::string normalized;
  segment_cache segments{max_segment_ids};
  std::vector<std::size_t> next_added;  ///< where each added token next occurs (encode scratch)

  explicit cache(const pcre2_code* pattern)
      : match(pattern == nullptr ? nullptr : pcre2_match_data_create_from_pattern(pattern, nullptr)) {}
  ~cache() {
    if (match) pcre2_match_data_free(match);
  }

  /// Segments shorter than this are not worth a cache entry (the piece cache covers them).
  static constexpr std::size_t min_segment_bytes = 128;
  static constexpr std::size_t max_segment_ids = 1u << 20;  ///< 4 MiB of ids per tokenizer
};

std::expected<tokenizer, tokenizer_error> tokenizer::from_json(std::string_view json_text) {
  try {
    return load_tables(json_text);
  } catch (const json::exception& error) {  // a field of an unexpected type
    return fail(fmt::format("malformed tokenizer.json: {}", error.what()));
  }
}

std::expected<tokenizer, tokenizer_error> tokenizer::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  auto loaded = from_json(text.str());
  if (!loaded) return fail(path + ": " + loaded.error().message);
  return loaded;
}

std::expected<tokenizer, tokenizer_error> tokenizer::load_tables(std::string_view json_text) {
  auto parsed = parse_json<json>(json_text);
  if (!parsed && parsed.error() == json_parse_error::too_deep) return fail("tokenizer.json " + describe(parsed.error()));
  if (!parsed || !parsed->is_object()) return fail("tokenizer.json is not a JSON object");
  const json& document = *parsed;
  auto t = std::make_shared<tables>();

  const json& model = document.value("model", json::object());
  if (model.value("type", "") != "BPE")
    return fail(fmt::format("unsupported tokenizer model \"{}\" (only byte-level BPE is)", model.value("type", "none")));
  if (model.contains("dropout") && !model["dropout"].is_null()) return fail("BPE dropout is not supported");
  if (model.value("byte_fallback", false)) return fail("BPE byte_fallback is not supported (not a byte-level BPE)");
  auto non_empty_string = [&](const char* key) {  // absent and null both mean "none"
    const auto it = model.find(key);
    return it != model.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
  };
  if (non_empty_string("continuing_subword_prefix") || non_empty_string("end_of_word_suffix"))
    return fail("BPE continuing_subword_prefix / end_of_word_suffix are not supported");
  t->ignore_merges = model.value("ignore_merges", false);

  const auto byte_of = unicode_to_byte();
  const json& vocab = model.value("vocab", json::object());
  if (!vocab.is_object() || vocab.empty()) return fail("the BPE model has no vocab");
  std::unordered_map<std::string, std::uint32_t> vocab_map;
  vocab_map.reserve(vocab.size());
  std::array<bool, 256> have_byte{};
  std::vector<std::pair<std::uint32_t, std::string>> decoded_vocab;
  decoded_vocab.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    const auto value = id.get<std::uint32_t>();
    vocab_map.emplace(token, value);
    t->vocab_size = std::max<std::size_t>(t->vocab_size, value + 1);
    auto decoded = to_raw_bytes(token, byte_of);
    decoded_vocab.emplace_back(value, decoded ? *decoded : token);
    if (auto raw = std::move(decoded)) {
      if (raw->size() == 1) {
        t->byte_token[static_cast<std::uint8_t>((*raw)[0])] = value;
        have_byte[static_cast<std::uint8_t>((*raw)[0])] = true;
      }
      if (t->ignore_merges) t->vocab_by_bytes.emplace(std::move(*raw), value);
    }
  }
  if (!std::all_of(have_byte.begin(), have_byte.end(), [](bool b) { return b; }))
    return fail("the vocab lacks some of the 256 byte-level symbols (not a byte-level BPE)");

  const json& merges = model.value("merges", json::array());
  t->merges.rules.reserve(merges.size());
  t->merges.rank_limit = static_cast<std::uint32_t>(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    std::string left, right;
    if (merges[rank].is_string()) {  // "a b"
      const std::string text = merges[rank].get<std::string>();
      const auto space = text.find(' ', 1);
      if (space == std::string::npos) return fail(fmt::format("merge {} (\"{}\") is not \"a b\"", rank, text));
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (merges[rank].is_array() && merges[rank].size() == 2) {  // ["a", "b"]
      left = merges[rank][0].get<std::string>();
      right = merges[rank][1].get<std::string>();
    } else {
      return fail(fmt::format("merge {} is neither \"a b\" nor [\"a\", \"b\"]", rank));
    }
    const auto a = vocab_map.find(left), b = vocab_map.find(right), ab = vocab_map.find(left + right);
    if (a == vocab_map.end() || b == vocab_map.end() || ab == vocab_map.end())
      return fail(fmt::format("merge {} (\"{}\" + \"{}\") names a token missing from the vocab", rank, left, right));
    t->merges.rules.try_emplace(bpe_pair_key(a->second, b->second), bpe_merge_rule{static_cast<std::uint32_t>(rank), ab->second});
  }

  for (const json& added : document.value("added_tokens", json::array())) {
    const std::string content = added.value("content", "");
    if (content.empty()) continue;
    if (added.value("single_word", false) || added.value("lstrip", false) || added.value("rstrip", false))
      return fail(fmt::format("added token \"{}\": single_word / lstrip / rstrip are not supported", content));
    t->added_tokens.push_back({content, added.at("id").get<std::uint32_t>()});
    t->vocab_size = std::max<std::size_t>(t->vocab_size, t->added_tokens.back().id + 1);
  }
  // The decoding table: vocab entries, then added tokens (their content decoded as HF's
  // ByteLevel decoder does: through the byte-level alphabet if it all belongs to it, else as is).
  t->token_bytes.assign(t->vocab_size, std::string());
  t->special.assign(t->vocab_size, false);
  std::vector<bool> known(t->vocab_size, false);
  for (auto& [id, bytes] : decoded_vocab) {
    t->token_bytes[id] = std::move(bytes);
    known[id] = true;
  }
  for (const json& added : document.value("added_tokens", json::array())) {
    const std::string content = added.value("content", "");
    const auto id = added.at("id").get<std::uint32_t>();
    if (content.empty() || id >= t->vocab_size) continue;
    auto raw = to_raw_bytes(content, byte_of);
    t->token_bytes[id] = raw ? *raw : content;
    t->special[id] = added.value("special", false);
    known[id] = true;
  }
  t->known = std::move(known);
  std::sort(t->added_tokens.begin(), t->added_tokens.end(),
            [](const auto& x, const auto& y) { return x.content.size() > y.content.size(); });
  for (const auto& added : t->added_tokens)
    if (t->added_first_bytes.find(added.content.front()) == std::string::npos) t->added_first_bytes += added.content.front();
  if (auto affixes = read_post_processor(document.value("post_processor", json())); !affixes)
    return fail(affixes.error());
  else
    t->affixes = std::move(*affixes);

  const json& normalizer = document.value("normalizer", json());
  if (!normalizer.is_null()) {
    if (normalizer.value("type", "") != "NFC")
      return fail(fmt::format("unsupported normalizer \"{}\" (NFC or none)", normalizer.value("type", "?")));
    t->nfc = true;
  }

  // Pre-tokenizer: Sequence[Split(regex, Isolated), ByteLevel(use_regex false)], or ByteLevel
  // with GPT-2's regex.
  std::string pattern;
  const json& pre = document.value("pre_tokenizer", json());
  auto byte_level_ok = [](const json& p) { return !p.value("add_prefix_space", false); };
  if (pre.value("type", "") == "ByteLevel") {
    if (!byte_level_ok(pre)) return fail("ByteLevel add_prefix_space is not supported");
    if (!pre.value("use_regex", true)) return fail("a ByteLevel pre-tokenizer without a regex is not supported");
    pattern = split_regex(split_pattern::gpt2);
  } else if (pre.value("type", "") == "Sequence") {
    const json& steps = pre.value("pretokenizers", json::array());
    if (steps.size() != 2 || steps[0].value("type", "") != "Split" || steps[1].value("type", "") != "ByteLevel")
      return fail("unsupported pre-tokenizer sequence (expected Split then ByteLevel)");
    const json& split = steps[0];
    if (split.value("behavior", "") != "Isolated" || split.value("invert", false))
      return fail(fmt::format("unsupported Split behavior \"{}\" (Isolated only)", split.value("behavior", "?")));
    if (!split.contains("pattern") || !split["pattern"].contains("Regex"))
      return fail("the Split pre-tokenizer needs a Regex pattern");
    pattern = split["pattern"]["Regex"].get<std::string>();
    if (!byte_level_ok(steps[1]) || steps[1].value("use_regex", true))
      return fail("the ByteLevel step after Split must have add_prefix_space and use_regex false");
  } else {
    return fail(fmt::format("unsupported pre-tokenizer \"{}\"", pre.value("type", "none")));
  }
  if ((t->split = known_split_pattern(pattern))) return tokenizer(std::move(t));
  int error = 0;
  PCRE2_SIZE offset = 0;
  t->pattern = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                             &error, &offset, nullptr);
  if (t->pattern == nullptr) {
    std::array<PCRE2_UCHAR, 256> message{};
    pcre2_get_error_message(error, message.data(), message.size());
    return fail(fmt::format("the pre-tokenizer regex does not compile at {}: {}", offset,
                            reinterpret_cast<const char*>(message.data())));
  }
  pcre2_jit_compile(t->pattern, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is unavailable
  return tokenizer(std::move(t));
}

tokenizer::tokenizer(std::shared_ptr<const tables> tables)
    : tables_(std::move(tables)), cache_(std::make_unique<cache>(tables_->pattern)) {}
tokenizer::tokenizer(tokenizer&&) noexcept = default;
tokenizer& tokenizer::operator=(tokenizer&&) noexcept = default;
tokenizer::~tokenizer() = default;

tokenizer tokenizer::share() const { return tokenizer(tables_); }
std::size_t tokenizer::vocab_size() const { return tables_->vocab_size; }
tokenizer::segment_cache_stats tokenizer::segment_stats() const {
  return {cache_->segments.hits(), cache_->segments.misses()};
}

std::optional<std::string> tokenizer::decode(std::span<const std::uint32_t> ids, bool skip_special_tokens) const {
  const tables& t = *tables_;
  std::string bytes;
  for (const std::uint32_t id : ids) {
    if (id >= t.known.size() || !t.known[id]) return std::nullopt;
    if (skip_special_tokens && t.special[id]) continue;
    bytes += t.token_bytes[id];
  }
  std::string text;
  text.reserve(bytes.size());
  append_utf8_lossy(bytes, text);
  return text;
}

const tokenizer::special_affixes& tokenizer::added_special_tokens() const { return tables_->affixes; }

std::optional<std::uint32_t> tokenizer::added_token_id(std::string_view content) const {
  for (const auto& added : tables_->added_tokens)
    if (added.content == content) return added.id;
  return std::nullopt;
}

void tokenizer::encode(std::string_view text, std::vector<std::uint32_t>& out, std::size_t limit) {
  const tables& t = *tables_;
  cache& c = *cache_;
  auto past_limit = [&] { return out.size() > limit; };

  /// The piece `segment.substr(from, size)`: from the cache, else merged (and cached).
  auto encode_piece = [&](std::string_view segment, std::size_t from, std::size_t size) {
    const std::string_view piece = segment.substr(from, size);
    const bool cacheable = size <= piece_cache::max_piece;
    piece_cache::key key;
    if (cacheable) {
      key = piece_cache::key_of(segment, from, size);
      if (c.pieces.append(piece, key, out)) return;
    }
    if (t.ignore_merges) {
      if (auto it = t.vocab_by_bytes.find(std::string(piece)); it != t.vocab_by_bytes.end()) {
        out.push_back(it->second);
        return;
      }
    }
    bpe_merge_piece(piece, t.byte_token, t.merges, c.symbols, c.merge_scratch, limit - std::min(limit, out.size()));
    out.insert(out.end(), c.symbols.begin(), c.symbols.end());
    if (cacheable) c.pieces.insert(piece, key, c.symbols);
    // A huge word's ids (up to 4 bytes per byte) are let go; its merge scratch is a window's.
    if (c.symbols.capacity() > kept_symbols) std::vector<std::uint32_t>().swap(c.symbols);
  };

  auto encode_uncached_segment = [&](std::string_view segment) {
    if (t.nfc && nfc_into(segment, c.normalized)) segment = c.normalized;
    if (t.split) {
      if (!valid_utf8(segment)) return encode_piece(segment, 0, segment.size());  // as PCRE2 refuses it: one piece
      std::array<std::size_t, 256> ends;
      for (std::size_t start = 0; start < segment.size() && !past_limit();) {
        const std::size_t count = piece_ends(*t.split, segment, start, ends);
        for (std::size_t i = 0; i < count; ++i) {
          encode_piece(segment, start, ends[i] - start);
          start = ends[i];
        }
      }
      return;
    }
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(segment.data());
    std::size_t position = 0;
    std::size_t gap_start = 0;
    // PCRE2 validates the whole subject on every call unless told not to: check it once.
    std::uint32_t options = 0;
    while (position <= segment.size() && !past_limit()) {
      const int rc = pcre2_match(t.pattern, subject, segment.size(), position, options, c.match, nullptr);
      if (rc < 0) break;  // no more matches (or invalid UTF-8: the rest is one piece)
      options = PCRE2_NO_UTF_CHECK;
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(c.match);
      const std::size_t start = ovector[0], end = ovector[1];
      if (start > gap_start) encode_piece(segment, gap_start, start - gap_start);
      if (end > start) encode_piece(segment, start, end - start);
      gap_start = end;
      if (end == start) {  // an empty match: step over one code point
        std::size_t step = 1;
        while (end + step < segment.size() && (static_cast<unsigned char>(segment[end + step]) & 0xC0) == 0x80) ++step;
        position = end + step;
      } else {
        position = end;
      }
    }
    if (gap_start < segment.size() && !past_limit()) encode_piece(segment, gap_start, segment.size() - gap_start);
  };

  auto encode_segment = [&](std::string_view segment) {
    if (segment.empty()) return;
    if (segment.size() < cache::min_segment_bytes || !segment_cache_enabled_) return encode_uncached_segment(segment);
    const std::uint64_t key = XXH3_64bits(segment.data(), segment.size());
    if (const auto* ids = c.segments.find(key, segment.size())) {
      out.insert(out.end(), ids->begin(), ids->end());
      return;
    }
    const std::size_t first = out.size();
    encode_uncached_segment(segment);
    if (!past_limit()) c.segments.insert(key, segment.size(), std::span(out).subspan(first));  // never a cut one
  };

  // Added tokens first: the earliest occurrence of any (the longest at equal positions). The
  // text is scanned for the tokens' first bytes (one for Qwen's and Llama's, `<`), each
  // byte's next occurrence remembered, and candidates are compared where one occurs.
  const std::string_view firsts = t.added_first_bytes;
  c.next_added.resize(firsts.size());
  for (std::size_t k = 0; k < firsts.size(); ++k) c.next_added[k] = text.find(firsts[k]);
  std::size_t position = 0;
  while (position < text.size() && !past_limit()) {
    std::size_t k = 0;
    for (std::size_t j = 1; j < firsts.size(); ++j)
      if (c.next_added[j] < c.next_added[k]) k = j;
    if (firsts.empty() || c.next_added[k] == std::string_view::npos) break;
    const std::size_t at = c.next_added[k];
    const tables::added* match = nullptr;
    for (const tables::added& token : t.added_tokens)  // longest first
      if (text.substr(at).starts_with(token.content)) {
        match = &token;
        break;
      }
    if (match == nullptr) {
      c.next_added[k] = text.find(firsts[k], at + 1);
      continue;
    }
    encode_segment(text.substr(position, at - position));
    out.push_back(match->id);
    position = at + match->content.size();
    for (std::size_t j = 0; j < firsts.size(); ++j)
      if (c.next_added[j] != std::string_view::npos && c.next_added[j] < position) c.next_added[j] = text.find(firsts[j], position);
  }
  if (position < text.size() && !past_limit()) encode_segment(text.substr(position));
}

}  // namespace kvr
