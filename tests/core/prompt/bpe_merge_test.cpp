#include "core/prompt/bpe_merge.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>

namespace kvr {
namespace {

/// Every byte is its own symbol (ids 0..255); merges make ids from 256 up.
bpe_byte_tokens identity_bytes() {
  bpe_byte_tokens bytes{};
  std::iota(bytes.begin(), bytes.end(), 0u);
  return bytes;
}

/// A random table over the letters a..d: each merge joins two tokens made so far, and ranks are
/// shuffled, so a merge of merges often ranks before its parts (real tables have such merges;
/// they are what the bucket queue's `urgent` heap is for).
bpe_merges random_table(std::mt19937& rng, int merges_wanted) {
  std::vector<std::uint32_t> pool = {'a', 'b', 'c', 'd'};
  std::vector<std::pair<std::uint64_t, std::uint32_t>> made;  // (pair key, merged id)
  std::uint32_t next_id = 256;
  while (static_cast<int>(made.size()) < merges_wanted) {
    std::uniform_int_distribution<std::size_t> pick(0, pool.size() - 1);
    const std::uint64_t key = bpe_pair_key(pool[pick(rng)], pool[pick(rng)]);
    if (std::any_of(made.begin(), made.end(), [&](const auto& m) { return m.first == key; })) continue;
    made.emplace_back(key, next_id);
    pool.push_back(next_id++);
  }
  std::vector<std::uint32_t> ranks(made.size());
  std::iota(ranks.begin(), ranks.end(), 0u);
  std::shuffle(ranks.begin(), ranks.end(), rng);
  bpe_merges table;
  for (std::size_t i = 0; i < made.size(); ++i) table.rules.try_emplace(made[i].first, bpe_merge_rule{ranks[i], made[i].second});
  table.rank_limit = static_cast<std::uint32_t>(made.size());
  return table;
}

/// a+a -> 256, 256+256 -> 257, 257+257 -> 258: runs of one letter merge into eights.
bpe_merges doubling_table() {
  bpe_merges table;
  table.rules.try_emplace(bpe_pair_key('a', 'a'), bpe_merge_rule{0, 256});
  table.rules.try_emplace(bpe_pair_key(256, 256), bpe_merge_rule{1, 257});
  table.rules.try_emplace(bpe_pair_key(257, 257), bpe_merge_rule{2, 258});
  table.rank_limit = 3;
  return table;
}

std::string random_text(std::mt19937& rng, std::size_t size, int letters) {
  std::uniform_int_distribution<int> letter(0, letters - 1);
  std::string text(size, 'a');
  for (char& c : text) c = static_cast<char>('a' + letter(rng));
  return text;
}

TEST(BpeMerge, every_piece_merges_as_the_reference_heap_does_whatever_its_length_and_table) {
  std::mt19937 rng(40);
  const bpe_byte_tokens bytes = identity_bytes();
  bpe_scratch scratch;  // shared by every piece, as a tokenizer's is
  std::vector<std::uint32_t> fast, reference;
  for (int table_number = 0; table_number < 40; ++table_number) {
    const bpe_merges table = random_table(rng, 8 + table_number * 6);
    for (const std::size_t size : {1, 2, 17, 64, 65, 200, 1000, 4000}) {
      for (const int letters : {1, 2, 4}) {
        const std::string text = random_text(rng, size, letters);
        bpe_merge_piece(text, bytes, table, fast, scratch);
        bpe_merge_piece_by_heap(text, bytes, table, reference);
        ASSERT_EQ(fast, reference) << "table " << table_number << ", " << size << " bytes of " << letters << " letters";
      }
    }
  }
}

TEST(BpeMerge, a_piece_merged_a_window_at_a_time_gives_the_whole_merges_ids) {
  // Windows of 256 bytes with 64 of lookahead, on pieces of up to 40 of them: every window's cut
  // must fall where the whole merge has a boundary (long_words_test holds the real 64 KiB
  // windows to HuggingFace on the Qwen3 table).
  std::mt19937 rng(41);
  const bpe_byte_tokens bytes = identity_bytes();
  bpe_scratch scratch;
  std::vector<std::uint32_t> windowed, reference;
  for (int table_number = 0; table_number < 30; ++table_number) {
    const bpe_merges table = random_table(rng, 8 + table_number * 6);
    for (const std::size_t size : {321, 1000, 10000}) {
      for (const int letters : {1, 2, 3, 4}) {
        const std::string text = random_text(rng, size, letters);
        bpe_merge_piece(text, bytes, table, windowed, scratch, SIZE_MAX, {.span = 256, .lookahead = 64});
        bpe_merge_piece_by_heap(text, bytes, table, reference);
        ASSERT_EQ(windowed, reference) << "table " << table_number << ", " << size << " bytes of " << letters << " letters";
      }
    }
  }
}

TEST(BpeMerge, windows_that_repeat_the_one_before_copy_its_ids_and_give_the_whole_merges) {
  // Runs of one letter and repeated patterns, broken now and then, so a window is sometimes the
  // same bytes as the one before (its ids are copied) and sometimes not (it is merged); and the
  // same with a stop that lands in a copied window.
  std::mt19937 rng(43);
  const bpe_byte_tokens bytes = identity_bytes();
  bpe_scratch scratch;
  std::vector<std::uint32_t> windowed, reference;
  for (int table_number = 0; table_number < 20; ++table_number) {
    const bpe_merges table = random_table(rng, 8 + table_number * 6);
    for (const std::string unit : {"a", "ab", "abc", "abcd", "aab"}) {
      std::string text;
      while (text.size() < 20000) {
        for (int i = 0; i < 2000; ++i) text += unit;
        text += random_text(rng, 1 + rng() % 5, 4);
      }
      bpe_merge_piece(text, bytes, table, windowed, scratch, SIZE_MAX, {.span = 256, .lookahead = 64});
      bpe_merge_piece_by_heap(text, bytes, table, reference);
      ASSERT_EQ(windowed, reference) << "table " << table_number << ", unit " << unit;
      bpe_merge_piece(text, bytes, table, windowed, scratch, 700, {.span = 256, .lookahead = 64});
      ASSERT_GT(windowed.size(), 700u);
      ASSERT_TRUE(std::equal(windowed.begin(), windowed.end(), reference.begin())) << "stopped, unit " << unit;
    }
  }
}

TEST(BpeMerge, windows_smaller_than_a_token_still_cover_every_byte_once) {
  // a+a, aa+aa, aaaa+aaaa make ids of 8 bytes; windows of 3 bytes cut them, but no byte is lost
  // or repeated: the ids still spell the piece.
  const bpe_merges table = doubling_table();
  bpe_scratch scratch;
  std::vector<std::uint32_t> ids;
  bpe_merge_piece(std::string(1000, 'a'), identity_bytes(), table, ids, scratch, SIZE_MAX, {.span = 3, .lookahead = 2});
  std::size_t spelled = 0;
  for (const std::uint32_t id : ids) spelled += id == 'a' ? 1 : id == 256 ? 2 : id == 257 ? 4 : 8;
  EXPECT_EQ(spelled, 1000u);
}

TEST(BpeMerge, a_long_piece_stops_soon_after_the_ids_asked_for_with_a_prefix_of_the_whole_merges) {
  std::mt19937 rng(42);
  const bpe_merges table = random_table(rng, 60);
  const std::string text = random_text(rng, 1u << 20, 3);
  bpe_scratch scratch;
  std::vector<std::uint32_t> whole, stopped;
  bpe_merge_piece(text, identity_bytes(), table, whole, scratch);
  bpe_merge_piece(text, identity_bytes(), table, stopped, scratch, 1000);
  ASSERT_GT(stopped.size(), 1000u);
  EXPECT_LT(stopped.size(), whole.size() / 4) << "it stopped within a window or two of the limit";
  EXPECT_TRUE(std::equal(stopped.begin(), stopped.end(), whole.begin()));
}

TEST(BpeMerge, a_piece_of_one_letter_merges_to_the_longest_runs_the_table_makes) {
  // a+a, aa+aa, aaaa+aaaa: 1000 letters are 125 eights.
  const bpe_merges table = doubling_table();
  bpe_scratch scratch;
  std::vector<std::uint32_t> ids;
  bpe_merge_piece(std::string(1003, 'a'), identity_bytes(), table, ids, scratch);
  std::vector<std::uint32_t> expected(125, 258);
  expected.insert(expected.end(), {256, 'a'});
  EXPECT_EQ(ids, expected);
}

TEST(BpeMerge, bytes_the_table_never_merges_stay_one_symbol_each) {
  bpe_merges table;
  table.rules.try_emplace(bpe_pair_key('a', 'b'), bpe_merge_rule{0, 256});
  table.rank_limit = 1;
  bpe_scratch scratch;
  std::vector<std::uint32_t> ids;
  const std::string text(300, 'z');
  bpe_merge_piece(text, identity_bytes(), table, ids, scratch);
  EXPECT_EQ(ids, std::vector<std::uint32_t>(300, 'z'));
  bpe_merge_piece("", identity_bytes(), table, ids, scratch);
  EXPECT_TRUE(ids.empty());
}

}  // namespace
}  // namespace kvr
