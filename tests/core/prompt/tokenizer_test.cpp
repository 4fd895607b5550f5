#include "core/prompt/tokenizer.hpp"

#include <algorithm>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/core/test_files.hpp"

namespace kvr {
namespace {

using kvr::testing::read_file;

const std::string qwen3_path = std::string(KVR_TOKENIZER_DIR) + "/qwen3/tokenizer.json";

tokenizer& qwen3() {
  static tokenizer loaded = [] {
    auto t = tokenizer::from_json(read_file(qwen3_path));
    if (!t) throw std::runtime_error(t.error().message);
    return std::move(*t);
  }();
  return loaded;
}

void expect_golden(tokenizer& t, const std::string& golden_file) {
  const auto corpus = nlohmann::json::parse(read_file(std::string(KVR_TEST_DATA_DIR) + "/tokenizer/corpus.json"))["texts"];
  const auto golden = nlohmann::json::parse(read_file(std::string(KVR_TEST_DATA_DIR) + "/tokenizer/" + golden_file))["ids"];
  ASSERT_EQ(corpus.size(), golden.size());
  std::vector<std::uint32_t> ids;
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    ids.clear();
    t.encode(corpus[i].get<std::string>(), ids);
    EXPECT_EQ(ids, golden[i].get<std::vector<std::uint32_t>>()) << "text " << i << ": " << corpus[i];
  }
}

TEST(tokenizer, qwen3_matches_huggingface_tokenizers_on_every_corpus_text) { expect_golden(qwen3(), "qwen3_golden.json"); }

/// Every golden decoding: whole, half (often cut inside a character), every prefix of up to 24
/// tokens, and with special tokens skipped.
void expect_golden_decoding(const tokenizer& t, const std::string& golden_file) {
  const auto golden = nlohmann::json::parse(read_file(std::string(KVR_TEST_DATA_DIR) + "/tokenizer/" + golden_file));
  std::size_t replaced = 0;
  for (std::size_t i = 0; i < golden["ids"].size(); ++i) {
    const auto ids = golden["ids"][i].get<std::vector<std::uint32_t>>();
    EXPECT_EQ(t.decode(ids), golden["decoded"][i].get<std::string>()) << "text " << i;
    EXPECT_EQ(t.decode(ids, true), golden["decoded_skipping_special"][i].get<std::string>()) << "text " << i;
    const std::span<const std::uint32_t> all(ids);
    EXPECT_EQ(t.decode(all.first(ids.size() / 2)), golden["decoded_half"][i].get<std::string>()) << "text " << i;
    const auto& prefixes = golden["decoded_prefixes"][i];
    for (std::size_t k = 1; k <= prefixes.size(); ++k) {
      const std::string expected = prefixes[k - 1].get<std::string>();
      replaced += expected.find("\xEF\xBF\xBD") != std::string::npos;
      EXPECT_EQ(t.decode(all.first(k)), expected) << "text " << i << ", first " << k << " tokens";
    }
  }
  EXPECT_GT(replaced, 10u) << "the corpus cuts characters often enough to check the replacements";
}

TEST(tokenizer, qwen3_decodes_as_huggingface_tokenizers_does_cut_characters_and_special_tokens_included) {
  expect_golden_decoding(qwen3(), "qwen3_golden.json");
}

TEST(tokenizer, gpt2_decodes_as_huggingface_tokenizers_does) {
  auto gpt2 = tokenizer::from_json(read_file(std::string(KVR_TOKENIZER_DIR) + "/gpt2/tokenizer.json"));
  ASSERT_TRUE(gpt2);
  expect_golden_decoding(*gpt2, "gpt2_golden.json");
}

TEST(tokenizer, decoding_an_id_outside_the_vocabulary_fails_and_bare_bytes_are_replaced) {
  const std::vector<std::uint32_t> unknown{1, static_cast<std::uint32_t>(qwen3().vocab_size())};
  EXPECT_FALSE(qwen3().decode(unknown));
  EXPECT_EQ(qwen3().decode({}), "");
  EXPECT_TRUE(qwen3().added_special_tokens().prefix.empty()) << "Qwen's post-processor adds nothing";
}

TEST(tokenizer, a_template_post_processor_names_the_special_tokens_added_around_a_prompt) {
  auto doc = nlohmann::json::parse(read_file(qwen3_path));
  const auto bos = *qwen3().added_token_id("<|endoftext|>");
  doc["post_processor"] = nlohmann::json::parse(R"({"type": "Sequence", "processors": [
      {"type": "ByteLevel"},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
       "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [)" + std::to_string(bos) + R"(]}}}]})");
  auto t = tokenizer::from_json(doc.dump());
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->added_special_tokens().prefix, std::vector<std::uint32_t>{bos});
  EXPECT_TRUE(t->added_special_tokens().suffix.empty());
}

TEST(tokenizer, gpt2_with_string_merges_and_its_own_regex_matches_huggingface_tokenizers) {
  auto gpt2 = tokenizer::from_json(read_file(std::string(KVR_TOKENIZER_DIR) + "/gpt2/tokenizer.json"));
  ASSERT_TRUE(gpt2) << gpt2.error().message;
  EXPECT_EQ(gpt2->added_token_id("<|endoftext|>"), 50256u);
  expect_golden(*gpt2, "gpt2_golden.json");
}

TEST(tokenizer, a_huge_single_word_is_tokenized_without_quadratic_blowup) {
  // One 4 MB run of letters is a single pre-token; the naive O(n^2) merge would take hours.
  const std::string word(4u << 20, 'a');
  std::vector<std::uint32_t> ids;
  qwen3().encode(word, ids);
  EXPECT_FALSE(ids.empty());
  EXPECT_LT(ids.size(), word.size() / 4) << "merges happened";
}

TEST(tokenizer, a_text_past_the_limit_stops_soon_after_it_and_leaves_no_cut_ids_in_the_cache) {
  tokenizer t = qwen3().share();
  std::vector<std::uint32_t> whole, stopped;
  for (const std::string& text : {std::string(4u << 20, 'a'), std::string(1u << 20, '7'),
                                  [] { std::string prose; while (prose.size() < (1u << 20)) prose += "The quick brown fox. "; return prose; }()}) {
    whole.clear();
    stopped.clear();
    qwen3().share().encode(text, whole);
    t.encode(text, stopped, 10000);
    ASSERT_GT(stopped.size(), 10000u);
    EXPECT_LT(stopped.size(), 10000u + 20000u) << "within a merge window's ids of the limit";
    EXPECT_TRUE(std::equal(stopped.begin(), stopped.end(), whole.begin())) << text.substr(0, 20);
    stopped.clear();
    t.encode(text, stopped);  // the segment cache was not given the cut ids
    EXPECT_EQ(stopped, whole) << text.substr(0, 20);
  }
}

TEST(tokenizer, long_pieces_merge_like_short_ones) {
  // Pieces past 64 bytes take the heap path; repeating a word makes them long.
  const auto corpus = nlohmann::json::parse(read_file(std::string(KVR_TEST_DATA_DIR) + "/tokenizer/corpus.json"))["texts"];
  const auto golden = nlohmann::json::parse(read_file(std::string(KVR_TEST_DATA_DIR) + "/tokenizer/qwen3_golden.json"))["ids"];
  std::size_t long_ones = 0;
  std::vector<std::uint32_t> ids;
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = corpus[i].get<std::string>();
    if (text.size() <= 64) continue;
    ++long_ones;
    ids.clear();
    qwen3().encode(text, ids);
    EXPECT_EQ(ids, golden[i].get<std::vector<std::uint32_t>>()) << text.substr(0, 40);
  }
  EXPECT_GE(long_ones, 5u);
}

TEST(tokenizer, a_repeated_text_is_answered_from_the_cache_with_the_ids_of_the_first_time) {
  tokenizer t = qwen3().share();
  tokenizer uncached = qwen3().share();
  uncached.enable_segment_cache(false);
  const std::string text =
      "The quick brown fox jumps over the lazy dog. The quick brown fox jumps again, and again, over the same "
      "lazy dog, until the dog gets up and walks away.";
  ASSERT_GE(text.size(), 128u) << "segments this long are cached";
  std::vector<std::uint32_t> first, second, reference;
  t.encode(text, first);
  EXPECT_EQ(t.segment_stats().misses, 1u);
  EXPECT_EQ(t.segment_stats().hits, 0u);
  t.encode(text, second);
  EXPECT_EQ(t.segment_stats().hits, 1u) << "the second encode is a cache hit";
  uncached.encode(text, reference);
  EXPECT_EQ(first, reference);
  EXPECT_EQ(second, reference);
}

TEST(tokenizer, a_growing_chat_reuses_earlier_messages_and_gives_the_same_ids_as_without_reuse) {
  tokenizer reusing = qwen3().share();
  tokenizer fresh = qwen3().share();
  fresh.enable_segment_cache(false);
  std::string chat = "<|im_start|>system\nYou are a meticulous assistant who answers in full sentences.<|im_end|>\n";
  std::vector<std::uint32_t> with_reuse, without_reuse;
  for (int turn = 0; turn < 6; ++turn) {
    chat += "<|im_start|>user\nTurn " + std::to_string(turn) +
            ": explain, with an example or two, why caches that are keyed by content never go stale. "
            "Écrivez aussi une phrase en français, 並且用中文寫一句話 🙂.<|im_end|>\n";
    with_reuse.clear();
    without_reuse.clear();
    reusing.encode(chat + "<|im_start|>assistant\n", with_reuse);
    fresh.encode(chat + "<|im_start|>assistant\n", without_reuse);
    ASSERT_EQ(with_reuse, without_reuse) << "turn " << turn;
    chat += "<|im_start|>assistant\nBecause the key is the content itself, so a changed text is a different key. "
            "Answer number " + std::to_string(turn) + ".<|im_end|>\n";
  }
  // Turn n re-reads its n earlier user messages; only the new one misses. (The assistant
  // answers are under the 128-byte floor: the piece cache covers segments that short.)
  EXPECT_EQ(reusing.segment_stats().hits, 0u + 1 + 2 + 3 + 4 + 5);
  EXPECT_EQ(reusing.segment_stats().misses, 6u);
  EXPECT_EQ(fresh.segment_stats().hits, 0u);
}

TEST(tokenizer, special_tokens_inside_text_become_their_ids) {
  std::vector<std::uint32_t> ids;
  qwen3().encode("<|im_start|>user", ids);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], qwen3().added_token_id("<|im_start|>").value());
  EXPECT_EQ(qwen3().added_token_id("<|im_start|>"), 151644u);
}

TEST(tokenizer, unsupported_models_and_components_are_refused_by_name) {
  EXPECT_EQ(tokenizer::from_json("[]").error().message, "tokenizer.json is not a JSON object");
  EXPECT_EQ(tokenizer::from_json(R"({"model": {"type": "WordPiece"}})").error().message,
            "unsupported tokenizer model \"WordPiece\" (only byte-level BPE is)");
  auto doc = nlohmann::json::parse(read_file(qwen3_path));
  doc["normalizer"] = {{"type", "NFKC"}};
  EXPECT_EQ(tokenizer::from_json(doc.dump()).error().message, "unsupported normalizer \"NFKC\" (NFC or none)");
  doc["normalizer"] = nullptr;
  doc["pre_tokenizer"] = {{"type", "Metaspace"}};
  EXPECT_EQ(tokenizer::from_json(doc.dump()).error().message, "unsupported pre-tokenizer \"Metaspace\"");
}

TEST(tokenizer, a_field_of_the_wrong_type_is_an_error_not_a_crash) {
  EXPECT_TRUE(tokenizer::from_json(R"({"model": {"type": "BPE", "byte_fallback": "yes"}})").error().message.starts_with(
      "malformed tokenizer.json: "));
  auto doc = nlohmann::json::parse(read_file(qwen3_path));
  doc["model"]["continuing_subword_prefix"] = nullptr;  // as Llama-3's file has it: null means none
  doc["model"]["end_of_word_suffix"] = nullptr;
  EXPECT_TRUE(tokenizer::from_json(doc.dump()).has_value());
}

TEST(tokenizer, merges_as_strings_give_the_same_ids_as_merges_as_pairs) {
  auto doc = nlohmann::json::parse(read_file(qwen3_path));
  for (auto& merge : doc["model"]["merges"]) merge = merge[0].get<std::string>() + " " + merge[1].get<std::string>();
  auto as_strings = tokenizer::from_json(doc.dump());
  ASSERT_TRUE(as_strings) << as_strings.error().message;
  std::vector<std::uint32_t> a, b;
  as_strings->encode("Merges in both file formats: \"a b\" strings and [\"a\", \"b\"] pairs.", a);
  qwen3().encode("Merges in both file formats: \"a b\" strings and [\"a\", \"b\"] pairs.", b);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace kvr
