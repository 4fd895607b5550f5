#include "core/routing/set_summary.hpp"

#include <gtest/gtest.h>

namespace kvr {
namespace {

set_facts kv_set() {
  set_facts f;
  f.name = "qwen";
  f.workers = 2;
  f.kv_publishers = 2;
  f.prompts = {.tokenizer = true, .chat = true, .images = false};
  return f;
}

TEST(set_summary, a_complete_kv_set_says_every_prompt_is_hashed_from_events) {
  const set_summary s = summarize_set(kv_set());
  EXPECT_EQ(s.line,
            "worker set qwen: 2 worker(s), kv: token ids, text and chats hashed; index from the KV events of 2 "
            "publisher(s); no queue");
  EXPECT_TRUE(s.warnings.empty());
}

TEST(set_summary, a_kv_set_without_a_tokenizer_says_text_and_chats_route_on_load_and_warns) {
  set_facts f = kv_set();
  f.prompts = {};
  const set_summary s = summarize_set(f);
  EXPECT_EQ(s.line,
            "worker set qwen: 2 worker(s), kv: token ids hashed; text and chats: routed on load (no tokenizer); index "
            "from the KV events of 2 publisher(s); no queue");
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("text and chat prompts route on load alone: no tokenizer"), std::string::npos);
}

TEST(set_summary, a_tokenizer_without_a_chat_template_warns_about_chats_only) {
  set_facts f = kv_set();
  f.prompts.chat = false;
  const set_summary s = summarize_set(f);
  EXPECT_NE(s.line.find("token ids and text hashed; chats: routed on load (no chat template)"), std::string::npos) << s.line;
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("chat prompts route on load alone: no chat template"), std::string::npos);
}

TEST(set_summary, kv_events_without_publishers_and_approximate_mode_are_named) {
  set_facts f = kv_set();
  f.kv_publishers = 0;
  set_summary s = summarize_set(f);
  EXPECT_NE(s.line.find("no KV events: overlap stays 0"), std::string::npos);
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("no worker has a kv_events= endpoint"), std::string::npos);
  f.config.use_kv_events = false;
  s = summarize_set(f);
  EXPECT_NE(s.line.find("index predicted from routing decisions (approximate mode)"), std::string::npos);
  EXPECT_TRUE(s.warnings.empty());
}

TEST(set_summary, modes_that_read_no_prompt_and_the_queue_are_described) {
  set_facts f = kv_set();
  f.config.mode = router_mode::round_robin;
  EXPECT_EQ(summarize_set(f).line, "worker set qwen: 2 worker(s), round-robin: prompts not read; no queue");
  f.config = load_aware_preset();
  f.config.busy_threshold = 1.5;
  EXPECT_EQ(summarize_set(f).line,
            "worker set qwen: 2 worker(s), kv: routed on load alone (overlap credit 0); prompt lengths estimated from "
            "their bytes (token ids exact); queue while every worker has over 1.5 x 8192 booked prefill tokens (up to "
            "1024, 60 s)");
  EXPECT_TRUE(summarize_set(f).warnings.empty()) << "no tokenizer is no loss where prompts are not hashed";
}

}  // namespace
}  // namespace kvr
