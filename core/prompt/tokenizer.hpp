#pragma once
/// A HuggingFace `tokenizer.json` byte-level BPE tokenizer (GPT-2, Llama-3, Qwen2 / Qwen3
/// families), producing the same token ids as the `tokenizers` library, so that kv-mode
/// routing hashes the blocks the engines cache.
///
/// Pipeline (as HF applies it): added tokens are split out first; the rest is normalized (NFC,
/// when configured), pre-tokenized (the Split regex, or GPT-2's pattern for a plain ByteLevel
/// pre-tokenizer: the three known patterns matched by hand, core/prompt/pretokenizer, any other
/// with PCRE2 UTF + UCP + JIT), and each piece's bytes are merged by BPE rank. Pieces are
/// cached (core/prompt/piece_cache, bounded), so repeated words cost a table lookup. Unsupported models or
/// components are refused at load time with a message naming them.

#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvr {

struct tokenizer_error {
  std::string message;
};

class tokenizer {
 public:
  /// Loads `tokenizer.json` text.
  [[nodiscard]] static std::expected<tokenizer, tokenizer_error> from_json(std::string_view json_text);
  /// Reads and loads a `tokenizer.json` file; errors are "cannot read PATH" or "PATH: why".
  [[nodiscard]] static std::expected<tokenizer, tokenizer_error> load(const std::string& path);

  tokenizer(tokenizer&&) noexcept;
  tokenizer& operator=(tokenizer&&) noexcept;
  ~tokenizer();

  /// Appends the ids of `text` (UTF-8) to `out`. No special tokens are added. Not thread-safe
  /// (each hasher owns its copy's cache): use one tokenizer per thread, or `share()`.
  /// With `limit`, it stops once `out` holds more ids than that (then `out.size() > limit` and
  /// its ids are a prefix of the text's): a prompt that a token limit will refuse costs the
  /// limit's work and memory, not its own.
  void encode(std::string_view text, std::vector<std::uint32_t>& out, std::size_t limit = SIZE_MAX);

  /// A tokenizer sharing this one's read-only tables, with a cache of its own.
  [[nodiscard]] tokenizer share() const;

  /// Whole segments between special tokens are cached by a hash of their bytes (on by
  /// default; see core/prompt/segment_cache.hpp). Off, only pieces are cached: for benchmarks.
  void enable_segment_cache(bool on) { segment_cache_enabled_ = on; }
  struct segment_cache_stats {
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;
  };
  [[nodiscard]] segment_cache_stats segment_stats() const;

  /// The text of `ids`, as HF `tokenizers` decodes them (ByteLevel decoder): each token's bytes
  /// joined, then read as UTF-8 with every invalid sequence replaced by U+FFFD as Rust's
  /// `from_utf8_lossy` does. Special added tokens are left out with `skip_special_tokens`.
  /// nullopt if an id is not in the vocabulary. Thread-safe (reads the shared tables only).
  [[nodiscard]] std::optional<std::string> decode(std::span<const std::uint32_t> ids, bool skip_special_tokens = false) const;

  /// The special tokens the tokenizer's post-processor puts around a single sequence when
  /// special tokens are added (`TemplateProcessing`, e.g. Llama-3's `<|begin_of_text|>`);
  /// empty for ByteLevel post-processors (GPT-2, Qwen).
  struct special_affixes {
    std::vector<std::uint32_t> prefix;
    std::vector<std::uint32_t> suffix;
  };
  [[nodiscard]] const special_affixes& added_special_tokens() const;

  [[nodiscard]] std::size_t vocab_size() const;
  /// The id of an added (special) token, if there is one with this content.
  [[nodiscard]] std::optional<std::uint32_t> added_token_id(std::string_view content) const;

 private:
  struct tables;
  struct cache;
  tokenizer(std::shared_ptr<const tables> tables);
  [[nodiscard]] static std::expected<tokenizer, tokenizer_error> load_tables(std::string_view json_text);
  std::shared_ptr<const tables> tables_;
  std::unique_ptr<cache> cache_;
  bool segment_cache_enabled_ = true;
};

}  // namespace kvr
