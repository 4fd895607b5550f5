#pragma once
/// Byte-level BPE over one pre-tokenized piece: repeatedly merge the adjacent pair of lowest
/// rank, the leftmost among equal ranks, as HuggingFace `tokenizers` does (`Word::merge_all`).
///
/// The work is linear in the piece for every piece length, so one "word" of a whole prompt (a
/// megabyte of one letter, say) costs per byte what ordinary text does: short pieces scan for
/// the best pair; long ones keep their candidate pairs in a bucket per rank and visit the
/// buckets in rank order (docs/benchmarks.md, "tokenizer on pathological text").

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/common/flat_u64_map.hpp"

namespace kvr {

[[nodiscard]] constexpr std::uint64_t bpe_pair_key(std::uint32_t left, std::uint32_t right) {
  return (std::uint64_t{left} << 32) | right;
}

/// One merge of the table: the pair's rank (its line in `merges`) and the token it makes.
struct bpe_merge_rule {
  std::uint32_t rank = 0;
  std::uint32_t merged = 0;
};

/// The merge table, keyed by `bpe_pair_key(left, right)`, and one past its highest rank.
struct bpe_merges {
  flat_u64_map<bpe_merge_rule> rules;
  std::uint32_t rank_limit = 0;
};

/// Byte-level symbol of each byte value.
using bpe_byte_tokens = std::array<std::uint32_t, 256>;

/// What merging a long piece keeps between pieces, so that it allocates once per tokenizer, not
/// once per piece. One per thread of use, as the tokenizer's other caches are.
struct bpe_scratch {
  /// A pair that may merge, by its left symbol's position. Its rank names the pair (one merge
  /// per line of the table), so a merge since that changed either symbol shows as another rank
  /// there, or none: the candidate is stale and skipped.
  struct candidate {
    std::uint32_t position;
    std::uint32_t next;  ///< the next candidate of its rank's bucket, in the order found
  };
  struct ranked {
    std::uint32_t rank;
    std::uint32_t position;
  };
  std::vector<std::uint32_t> bucket_head, bucket_tail;  ///< per rank; all empty between calls
  std::vector<candidate> candidates;                    ///< every bucket's candidates
  std::vector<std::uint32_t> batch;                     ///< a bucket found out of order, sorted
  std::vector<std::uint32_t> ranks_pending;             ///< min-heap of the ranks whose bucket is not empty
  std::vector<ranked> urgent;  ///< min-heap of pairs found at or below the rank being merged
  std::vector<std::uint32_t> prev, next;
  std::vector<bool> removed;
  std::vector<std::uint32_t> window;  ///< one window's symbols, when a long piece is merged by windows
};

/// How a piece longer than `span + lookahead` bytes is merged: a window at a time, so that its
/// scratch (about 30 bytes per byte) is the window's, not the piece's, and a piece whose ids
/// pass a limit stops there. Each window of `span + lookahead` bytes is merged whole; its ids
/// that begin within the first `span` bytes are kept, and the next window begins where the
/// first id not kept does. That is exact whenever that boundary is also one of the whole
/// piece's merge (no merge ever crosses a boundary of the result, so both sides merge as they
/// would alone): merges are local, and `lookahead` bytes of context past the boundary decide
/// it in every text the tests know (bpe_merge_test holds windows to the whole merge on one
/// letter, spaces, digits, repeated patterns and random text, with HuggingFace's Qwen3 table).
/// HuggingFace merges a piece whole; a 64 KiB word is already far past real text.
struct bpe_windows {
  std::size_t span = std::size_t{64} << 10;
  std::size_t lookahead = std::size_t{4} << 10;
};

/// The token ids `piece` merges to, into `symbols` (cleared first). With `stop_after`, a long
/// piece stops once more ids than that are in `symbols` (then `symbols` is a prefix of them,
/// longer than `stop_after`): a prompt past a token limit costs the limit's work, not its own.
void bpe_merge_piece(std::string_view piece, const bpe_byte_tokens& byte_token, const bpe_merges& merges,
                     std::vector<std::uint32_t>& symbols, bpe_scratch& scratch, std::size_t stop_after = SIZE_MAX,
                     bpe_windows windows = {});

/// The same by the reference algorithm (one binary heap of every candidate pair, as
/// HuggingFace's is): O(n log n). For the tests that hold the fast paths to it.
void bpe_merge_piece_by_heap(std::string_view piece, const bpe_byte_tokens& byte_token, const bpe_merges& merges,
                             std::vector<std::uint32_t>& symbols);

}  // namespace kvr
