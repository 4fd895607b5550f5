#pragma once
/// The pre-tokenizer regexes of the tokenizer families kvrouter serves, matched by hand.
///
/// A byte-level BPE tokenizer first splits text with a regex (GPT-2's, or the Split pattern
/// of Llama-3 and Qwen2/Qwen3). A regex engine spends most of the tokenizer's time on them:
/// each match walks seven alternatives with backtracking. The three known patterns are
/// recognised by their exact text and matched here with one character-class lookup per code
/// point; any other pattern stays with PCRE2 (core/prompt/tokenizer.cpp).
///
/// Classes as Unicode 15 defines them (utf8proc's tables): `\p{L}` letters, `\p{N}` numbers,
/// `\s` the White_Space property. Where Debian's PCRE2 (Unicode 14) differs, this follows the
/// newer tables as HF `tokenizers` does: the letters and digits Unicode 15 added, and U+180E
/// (a space before Unicode 6.3, now a format character).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace kvr {

enum class split_pattern : std::uint8_t {
  gpt2,    ///< `'s|'t|… ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
  qwen2,   ///< `(?i:'s|…)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
  llama3,  ///< as qwen2 with `\p{N}{1,3}`
};

/// What the patterns ask of a code point.
enum class char_class : std::uint8_t { letter, number, space, other };

/// The class of code point `cp` (as the matcher sees it): `\p{L}`, `\p{N}`, `\s`, or none.
[[nodiscard]] char_class classify(std::uint32_t cp);

/// Which known pattern `regex` is, by its exact text; nullopt for any other.
[[nodiscard]] std::optional<split_pattern> known_split_pattern(std::string_view regex);

/// A known pattern's exact text (GPT-2's is what a ByteLevel pre-tokenizer with
/// `use_regex: true` means).
[[nodiscard]] std::string_view split_regex(split_pattern pattern);

/// The ends of the pieces from `at` (< text.size()) on, as many as fit in `ends` (or up to the
/// text's end); returns how many. Each piece ends where the regex's leftmost match starting at
/// its first byte does; every position starts a match of these patterns, so pieces tile the
/// text. `text` must be valid UTF-8 (check with `valid_utf8`). One call per batch keeps the
/// matcher inlined in its loop.
[[nodiscard]] std::size_t piece_ends(split_pattern pattern, std::string_view text, std::size_t at, std::span<std::size_t> ends);

/// Whether `text` is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
[[nodiscard]] bool valid_utf8(std::string_view text);

}  // namespace kvr
