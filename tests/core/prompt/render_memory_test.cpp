// What rendering and tokenizing a chat allocates at its peak, against the size of its
// `messages` JSON, for the shapes of body an attacker can choose. Its own binary: it links
// the counting allocator (tests/support), which other tests need not see.

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/prompt/chat_template.hpp"
#include "core/prompt/jinja/json_value.hpp"
#include "core/prompt/tokenizer.hpp"
#include "tests/support/counting_allocator.hpp"

namespace kvr {
namespace {

using testing::live_bytes;
using testing::peak_bytes;

const std::string qwen3_dir = std::string(KVR_TOKENIZER_DIR) + "/qwen3";

/// Peak bytes allocated while `messages_json` is rendered with Qwen3's template and tokenized,
/// as a multiple of its size (the tokenizer and template loaded before, their caches warm on
/// other text: what a hasher holds anyway is not counted).
double render_and_tokenize_amplification(const std::string& messages_json) {
  static tokenizer loaded = *tokenizer::load(qwen3_dir + "/tokenizer.json");
  static chat_template chat = *chat_template::load(qwen3_dir + "/tokenizer_config.json");
  tokenizer t = loaded.share();
  std::vector<std::uint32_t> ids;
  ids.reserve(16);
  t.encode("warm up the caches a little", ids);
  const std::size_t before = live_bytes.load();
  peak_bytes.store(before);
  {
    auto rendered = chat.render({.messages_json = messages_json});
    EXPECT_TRUE(rendered.has_value());
    ids.clear();
    if (rendered) t.encode(*rendered, ids);
  }
  const double peak = static_cast<double>(peak_bytes.load() - before);
  const double amplification = peak / static_cast<double>(messages_json.size());
  std::printf("  %zu bytes of messages: peak +%.1f MB (%.2fx)\n", messages_json.size(), peak / 1e6, amplification);
  return amplification;
}

std::string tiny_messages(std::size_t count) {
  std::string json = "[";
  for (std::size_t i = 0; i < count; ++i) json += std::string(i ? "," : "") + R"({"role":"user","content":"a"})";
  return json + "]";
}

std::string one_message_of_prose(std::size_t bytes) {
  std::string text;
  while (text.size() < bytes) text += "The quick brown fox jumps over the lazy dog, again and again. ";
  return R"([{"role":"system","content":"Be brief."},{"role":"user","content":")" + text + R"("}])";
}

std::string one_message_of_one_letter(std::size_t bytes) {
  return R"([{"role":"user","content":")" + std::string(bytes, 'a') + R"("}])";
}

/// The messages are read straight into the template's values (core/prompt/jinja/json_value),
/// a long string is shared by every copy of its value, a concatenation is sized once and the
/// prompt's buffer grows by what is appended: a long message is held as its text, one
/// concatenation of it, the prompt and its ids. (Before: simdjson's DOM at 15 bytes per byte,
/// two nlohmann trees, a copy per lookup and per `+`: 15.6x.) Issue 40 asks for 4x.
TEST(render_memory, one_long_message_of_prose_peaks_under_four_times_its_json) {
  EXPECT_LT(render_and_tokenize_amplification(one_message_of_prose(4u << 20)), 4.0);
}

TEST(render_memory, nothing_of_a_long_chat_stays_allocated_once_it_is_rendered_and_tokenized) {
  static tokenizer loaded = *tokenizer::load(qwen3_dir + "/tokenizer.json");
  static chat_template chat = *chat_template::load(qwen3_dir + "/tokenizer_config.json");
  tokenizer t = loaded.share();
  std::vector<std::uint32_t> ids;
  ids.reserve(2u << 20);
  const std::string messages = one_message_of_one_letter(16u << 20);
  const std::size_t before = live_bytes.load();
  t.encode(*chat.render({.messages_json = messages}), ids);
  // What remains is bounded per tokenizer, whatever the chat's size: the segment cache's copy of
  // the ids (4 bytes each), the piece cache's few entries, one merge window's scratch (~4 MB)
  // and up to 4 MiB of one piece's ids, kept for the next piece; a huge word's are let go.
  EXPECT_LT(live_bytes.load() - before, ids.size() * sizeof(std::uint32_t) + (std::size_t{8} << 20));
}

TEST(render_memory, one_long_word_peaks_under_four_times_its_json) {
  // One pre-tokenizer piece, merged a 64 KiB window at a time: the merge's scratch (about 30
  // bytes per byte) is a window's, about 2 MB. (Merged whole, 8 MiB of one letter took 62x.)
  EXPECT_LT(render_and_tokenize_amplification(one_message_of_one_letter(8u << 20)), 4.0);
}

TEST(render_memory, a_chat_of_twenty_thousand_tiny_messages_is_rendered_within_the_budget_s_floor) {
  // A 30-byte message is a dict of two members in the template's values (~260 bytes with the
  // list's slot): about 10x its JSON, which the budget's 8 MiB floor lets through for any chat
  // of ordinary size.
  EXPECT_LT(render_and_tokenize_amplification(tiny_messages(20000)), 12.0);
}

/// Peak bytes allocated while `messages_json` is refused, and the field the refusal names.
std::pair<std::size_t, std::string> refusal_peak(const std::string& messages_json) {
  static chat_template chat = *chat_template::load(qwen3_dir + "/tokenizer_config.json");
  const std::size_t before = live_bytes.load();
  peak_bytes.store(before);
  std::string field;
  {
    auto rendered = chat.render({.messages_json = messages_json});
    EXPECT_FALSE(rendered.has_value());
    if (!rendered) field = rendered.error().refused_field;
  }
  const std::size_t peak = peak_bytes.load() - before;
  std::printf("  %zu bytes of messages refused (%s) at a peak of +%.1f MB (%.2fx)\n", messages_json.size(), field.c_str(),
              static_cast<double>(peak) / 1e6, static_cast<double>(peak) / static_cast<double>(messages_json.size()));
  return {peak, field};
}

/// What the value budget lets rendering build from `json_bytes` of the client's JSON, with the
/// slack of a list's spare capacity the reader does not count.
std::size_t budget_with_slack(std::size_t json_bytes) {
  return (jinja::value_budget::for_text_of(json_bytes).bytes_left * 3) / 2;
}

TEST(render_memory, a_chat_of_a_hundred_thousand_tiny_messages_is_refused_before_its_values_pass_the_budget) {
  // 3 MB of JSON would be 26 MB of values (it was rendered at 10.1x its JSON before the budget).
  const std::string messages = tiny_messages(100000);
  const auto [peak, field] = refusal_peak(messages);
  EXPECT_EQ(field, "messages");
  EXPECT_LT(peak, budget_with_slack(messages.size()));
}

TEST(render_memory, tool_call_arguments_of_millions_of_numbers_are_refused_before_their_values_pass_the_budget) {
  // 8 MB of numbers in one arguments string: 40 bytes of value for every 2 bytes of text.
  std::string numbers = "[";
  for (int i = 0; i < 4'000'000; ++i) numbers += i ? ",1" : "1";
  numbers += "]";
  const std::string messages = R"([{"role":"user","content":"go"},{"role":"assistant","content":null,"tool_calls":[)"
                               R"({"id":"c","type":"function","function":{"name":"f","arguments":")" +
                               numbers + R"("}}]}])";
  const auto [peak, field] = refusal_peak(messages);
  EXPECT_EQ(field, "messages[1].tool_calls[0].function.arguments");
  EXPECT_LT(peak, budget_with_slack(messages.size()));
}

}  // namespace
}  // namespace kvr
