#include "core/prompt/bpe_merge.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <functional>

namespace kvr {

namespace {

constexpr std::uint32_t none = UINT32_MAX;

/// Pieces up to this many bytes scan for their best pair after each merge: O(n^2), but with no
/// set-up and no allocation, which is what nearly every piece of real text wants.
constexpr std::size_t scan_limit = 64;

void load_bytes(std::string_view piece, const bpe_byte_tokens& byte_token, std::vector<std::uint32_t>& symbols) {
  symbols.clear();
  symbols.reserve(piece.size());
  for (char c : piece) symbols.push_back(byte_token[static_cast<std::uint8_t>(c)]);
}

void merge_by_scan(const bpe_merges& merges, std::vector<std::uint32_t>& symbols) {
  while (symbols.size() > 1) {
    std::uint32_t best_rank = none;
    std::size_t best = 0;
    std::uint32_t merged = 0;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      const bpe_merge_rule* m = merges.rules.find(bpe_pair_key(symbols[i], symbols[i + 1]));
      if (m != nullptr && m->rank < best_rank) {
        best_rank = m->rank;
        best = i;
        merged = m->merged;
      }
    }
    if (best_rank == none) return;
    symbols[best] = merged;
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
}

/// Drops the symbols merged away, keeping the order of the rest.
void compact(std::vector<std::uint32_t>& symbols, const std::vector<bool>& removed) {
  std::size_t out = 0;
  for (std::size_t i = 0; i < symbols.size(); ++i)
    if (!removed[i]) symbols[out++] = symbols[i];
  symbols.resize(out);
}

/// A linked list over the symbols, so that a merge unlinks its right symbol in O(1).
template <class Index>
void link(std::size_t n, std::vector<Index>& prev, std::vector<Index>& next, Index end) {
  prev.resize(n);
  next.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    prev[i] = i == 0 ? end : static_cast<Index>(i - 1);
    next[i] = i + 1 == n ? end : static_cast<Index>(i + 1);
  }
}

/// The bucket queue: the heap's order ((rank, position), smallest first) without its log n per
/// pair. Each rank's candidates wait in a bucket, in the order found; the buckets are taken in
/// rank order, each by position (it nearly always is in order already; if not, it is sorted). A
/// merge finds at most two new pairs: one of a higher rank joins that rank's bucket; one at or
/// below the rank being merged (a table need not rank a merge of merges after its parts) waits
/// in `urgent`, a small heap taken in turn with the bucket.
class bucket_merger {
 public:
  bucket_merger(const bpe_merges& merges, std::vector<std::uint32_t>& symbols, bpe_scratch& s)
      : merges_(merges), symbols_(symbols), s_(s) {}

  void run() {
    const std::size_t n = symbols_.size();
    if (s_.bucket_head.size() < merges_.rank_limit) {
      s_.bucket_head.assign(merges_.rank_limit, none);
      s_.bucket_tail.assign(merges_.rank_limit, none);
    }
    s_.candidates.clear();
    s_.candidates.reserve(n);
    s_.ranks_pending.clear();
    s_.urgent.clear();
    s_.removed.assign(n, false);
    link<std::uint32_t>(n, s_.prev, s_.next, none);
    for (std::uint32_t i = 0; i + 1 < n; ++i) consider(i);
    while (!s_.ranks_pending.empty()) {
      std::pop_heap(s_.ranks_pending.begin(), s_.ranks_pending.end(), std::greater<>{});
      const std::uint32_t rank = s_.ranks_pending.back();
      s_.ranks_pending.pop_back();
      merge_bucket(rank);
    }
  }

 private:
  /// Takes `rank`'s bucket, empties it, and applies its pairs by position, each after the
  /// urgent pairs that precede it.
  void merge_bucket(std::uint32_t rank) {
    const std::uint32_t first = s_.bucket_head[rank];
    s_.bucket_head[rank] = s_.bucket_tail[rank] = none;
    merging_below_ = rank + 1;  // from here, pairs found at `rank` or below are urgent
    if (in_order(first)) {
      // Indices, not references: applying a pair appends to `candidates`.
      for (std::uint32_t i = first; i != none; i = s_.candidates[i].next) step(rank, s_.candidates[i].position);
    } else {
      s_.batch.clear();
      for (std::uint32_t i = first; i != none; i = s_.candidates[i].next) s_.batch.push_back(s_.candidates[i].position);
      std::sort(s_.batch.begin(), s_.batch.end());
      for (const std::uint32_t position : s_.batch) step(rank, position);
    }
    while (!s_.urgent.empty()) apply(pop_urgent());
  }

  [[nodiscard]] bool in_order(std::uint32_t first) const {
    for (std::uint32_t i = first; i != none && s_.candidates[i].next != none; i = s_.candidates[i].next)
      if (s_.candidates[s_.candidates[i].next].position < s_.candidates[i].position) return false;
    return true;
  }

  void step(std::uint32_t rank, std::uint32_t position) {
    while (!s_.urgent.empty() && precedes(s_.urgent.front(), {rank, position})) apply(pop_urgent());
    apply({rank, position});
  }

  static bool precedes(const bpe_scratch::ranked& a, const bpe_scratch::ranked& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.position < b.position;
  }
  static bool later(const bpe_scratch::ranked& a, const bpe_scratch::ranked& b) { return precedes(b, a); }

  bpe_scratch::ranked pop_urgent() {
    std::pop_heap(s_.urgent.begin(), s_.urgent.end(), later);
    const bpe_scratch::ranked pair = s_.urgent.back();
    s_.urgent.pop_back();
    return pair;
  }

  /// Queues the pair whose left symbol is at `left`, if the table merges it.
  void consider(std::uint32_t left) {
    if (left == none) return;
    const std::uint32_t right = s_.next[left];
    if (right == none) return;
    const bpe_merge_rule* m = merges_.rules.find(bpe_pair_key(symbols_[left], symbols_[right]));
    if (m == nullptr) return;
    if (m->rank < merging_below_) {
      s_.urgent.push_back({m->rank, left});
      std::push_heap(s_.urgent.begin(), s_.urgent.end(), later);
      return;
    }
    const auto index = static_cast<std::uint32_t>(s_.candidates.size());
    s_.candidates.push_back({left, none});
    std::uint32_t& tail = s_.bucket_tail[m->rank];
    if (tail == none) {
      s_.bucket_head[m->rank] = index;
      s_.ranks_pending.push_back(m->rank);
      std::push_heap(s_.ranks_pending.begin(), s_.ranks_pending.end(), std::greater<>{});
    } else {
      s_.candidates[tail].next = index;
    }
    tail = index;
  }

  void apply(const bpe_scratch::ranked& pair) {
    const std::uint32_t left = pair.position;
    if (s_.removed[left]) return;
    const std::uint32_t right = s_.next[left];
    if (right == none) return;
    // Stale when the pair there now is another one (a merge since changed either symbol).
    const bpe_merge_rule* m = merges_.rules.find(bpe_pair_key(symbols_[left], symbols_[right]));
    if (m == nullptr || m->rank != pair.rank) return;
    symbols_[left] = m->merged;
    s_.removed[right] = true;
    const std::uint32_t after = s_.next[right];
    s_.next[left] = after;
    if (after != none) s_.prev[after] = left;
    consider(s_.prev[left]);
    consider(left);
  }

  const bpe_merges& merges_;
  std::vector<std::uint32_t>& symbols_;
  bpe_scratch& s_;
  std::uint32_t merging_below_ = 0;  ///< pairs ranked below this wait in `urgent`, not a bucket
};

/// A piece longer than a window, merged a window at a time (bpe_windows says why that is exact).
void merge_by_windows(std::string_view piece, const bpe_byte_tokens& byte_token, const bpe_merges& merges,
                      std::vector<std::uint32_t>& symbols, bpe_scratch& scratch, std::size_t stop_after,
                      bpe_windows windows) {
  symbols.clear();
  std::vector<std::uint32_t>& window = scratch.window;
  // The window before, and the ids it kept: a window of the same bytes merges the same, so a
  // run of one byte (32 MiB of spaces cost 2.3 s of CPU) or of a repeated pattern that falls
  // into the same phase is merged once, then copied.
  std::size_t previous_start = 0, previous_length = 0, previous_cut = 0, previous_ids = 0, previous_id_count = 0;
  for (std::size_t start = 0; start < piece.size() && symbols.size() <= stop_after;) {
    const std::size_t rest = piece.size() - start;
    const bool last = rest <= windows.span + windows.lookahead;
    const std::size_t length = last ? rest : windows.span + windows.lookahead;
    if (start > 0 && length == previous_length && !last &&
        std::memcmp(piece.data() + start, piece.data() + previous_start, length) == 0) {
      for (std::size_t i = 0; i < previous_id_count; ++i) symbols.push_back(std::uint32_t{symbols[previous_ids + i]});
      previous_start = start;
      previous_ids = symbols.size() - previous_id_count;
      start += previous_cut;
      continue;
    }
    load_bytes(piece.substr(start, length), byte_token, window);
    bucket_merger(merges, window, scratch).run();
    // A surviving symbol's position is the byte it begins at: keep those that begin before the
    // last id to begin within the span (or, should one id outgrow the span, the first after it).
    std::size_t cut = length;
    if (!last) {
      cut = windows.span;
      while (cut > 0 && scratch.removed[cut]) --cut;
      if (cut == 0)
        for (cut = windows.span; cut < length && scratch.removed[cut];) ++cut;
    }
    previous_ids = symbols.size();
    for (std::size_t i = 0; i < cut; ++i)
      if (!scratch.removed[i]) symbols.push_back(window[i]);
    previous_start = start;
    previous_length = length;
    previous_cut = cut;
    previous_id_count = symbols.size() - previous_ids;
    start += cut;
  }
}

}  // namespace

void bpe_merge_piece(std::string_view piece, const bpe_byte_tokens& byte_token, const bpe_merges& merges,
                     std::vector<std::uint32_t>& symbols, bpe_scratch& scratch, std::size_t stop_after,
                     bpe_windows windows) {
  windows.span = std::clamp<std::size_t>(windows.span, 1, none / 2);
  windows.lookahead = std::min<std::size_t>(windows.lookahead, none / 2);
  if (piece.size() > windows.span + windows.lookahead)
    return merge_by_windows(piece, byte_token, merges, symbols, scratch, stop_after, windows);
  load_bytes(piece, byte_token, symbols);
  if (symbols.size() <= scan_limit) return merge_by_scan(merges, symbols);
  bucket_merger(merges, symbols, scratch).run();
  compact(symbols, scratch.removed);
}

void bpe_merge_piece_by_heap(std::string_view piece, const bpe_byte_tokens& byte_token, const bpe_merges& merges,
                             std::vector<std::uint32_t>& symbols) {
  load_bytes(piece, byte_token, symbols);
  const std::size_t n = symbols.size();
  constexpr std::size_t end = SIZE_MAX;
  std::vector<std::size_t> prev, next;
  link<std::size_t>(n, prev, next, end);
  struct candidate {
    std::uint32_t rank;
    std::size_t left;
    std::uint32_t left_id, right_id;
    bool operator>(const candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::vector<candidate> heap;
  auto consider = [&](std::size_t left) {
    if (left == end || next[left] == end) return;
    if (const bpe_merge_rule* m = merges.rules.find(bpe_pair_key(symbols[left], symbols[next[left]]))) {
      heap.push_back({m->rank, left, symbols[left], symbols[next[left]]});
      std::push_heap(heap.begin(), heap.end(), std::greater<>{});
    }
  };
  for (std::size_t i = 0; i + 1 < n; ++i) consider(i);
  std::vector<bool> removed(n, false);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
    const candidate c = heap.back();
    heap.pop_back();
    const std::size_t right = next[c.left];
    if (removed[c.left] || right == end || symbols[c.left] != c.left_id || symbols[right] != c.right_id) continue;
    symbols[c.left] = merges.rules.find(bpe_pair_key(c.left_id, c.right_id))->merged;
    removed[right] = true;
    next[c.left] = next[right];
    if (next[right] != end) prev[next[right]] = c.left;
    consider(prev[c.left]);
    consider(c.left);
  }
  compact(symbols, removed);
}

}  // namespace kvr
