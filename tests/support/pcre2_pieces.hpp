#pragma once
/// The oracle for core/prompt/pretokenizer: the same patterns split by PCRE2 (UTF + UCP), as
/// the tokenizer did before it matched them by hand, and still does for any other pattern.
/// Header-only: the unit tests and the request fuzz target both check against it.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include "core/prompt/pretokenizer.hpp"

namespace kvr::testing {

/// The piece ends PCRE2 gives `text` under `regex` (gaps between matches are pieces too).
/// Compiled patterns are kept for the process (tests and fuzzing use a handful).
inline std::vector<std::size_t> pcre2_piece_ends(std::string_view regex, std::string_view text) {
  struct release {
    void operator()(pcre2_code* code) const { pcre2_code_free(code); }
  };
  static std::map<std::string, std::unique_ptr<pcre2_code, release>, std::less<>> compiled;
  auto found = compiled.find(regex);
  if (found == compiled.end()) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(regex.data()), regex.size(), PCRE2_UTF | PCRE2_UCP, &error,
                                     &offset, nullptr);
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    found = compiled.emplace(std::string(regex), code).first;
  }
  pcre2_code* code = found->second.get();
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(code, nullptr);
  std::vector<std::size_t> ends;
  std::size_t position = 0, gap_start = 0;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  while (position <= text.size()) {
    if (pcre2_match(code, subject, text.size(), position, 0, match, nullptr) < 0) break;
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
    if (ovector[0] > gap_start) ends.push_back(ovector[0]);
    if (ovector[1] > ovector[0]) ends.push_back(ovector[1]);
    gap_start = ovector[1];
    position = ovector[1] > ovector[0] ? ovector[1] : ovector[1] + 1;
  }
  if (gap_start < text.size()) ends.push_back(text.size());
  pcre2_match_data_free(match);
  return ends;
}

/// The piece ends kvrouter's matcher gives `text`.
inline std::vector<std::size_t> builtin_piece_ends(split_pattern pattern, std::string_view text) {
  std::vector<std::size_t> ends(text.size());
  ends.resize(piece_ends(pattern, text, 0, ends));
  return ends;
}

/// Whether PCRE2 classes every code point of `text` (valid UTF-8) as the matcher does. They
/// differ only where the Unicode versions do (Debian's PCRE2 has Unicode 14, utf8proc 15; see
/// core/prompt/pretokenizer.hpp); texts with such code points cannot be compared.
inline bool classes_agree_with_pcre2(std::string_view text) {
  static pcre2_code* letter = nullptr;
  static pcre2_code* number = nullptr;
  static pcre2_code* space = nullptr;
  static pcre2_match_data* match = nullptr;
  if (letter == nullptr) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    auto compile = [&](const char* regex) {
      return pcre2_compile(reinterpret_cast<PCRE2_SPTR>(regex), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED,
                           &error, &offset, nullptr);
    };
    letter = compile("\\p{L}");
    number = compile("\\p{N}");
    space = compile("\\s");
    match = pcre2_match_data_create(2, nullptr);
  }
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  for (std::size_t i = 0; i < text.size();) {
    utf8proc_int32_t cp = 0;
    const auto n = static_cast<std::size_t>(utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(text.size() - i), &cp));
    auto is = [&](pcre2_code* code) { return pcre2_match(code, p + i, n, 0, 0, match, nullptr) > 0; };
    const char_class theirs = is(letter) ? char_class::letter : is(number) ? char_class::number
                              : is(space)                   ? char_class::space
                                                            : char_class::other;
    if (theirs != classify(static_cast<std::uint32_t>(cp))) return false;
    i += n;
  }
  return true;
}

}  // namespace kvr::testing
