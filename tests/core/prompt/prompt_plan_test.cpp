#include "core/prompt/prompt_plan.hpp"

#include <gtest/gtest.h>

namespace kvr {
namespace {

routing_request chat(bool with_image) {
  routing_request r;
  r.endpoint = api_endpoint::chat_completions;
  r.messages = {.count = with_image ? 2u : 1u, .user_or_assistant = with_image ? 2u : 1u, .text_bytes = 2};
  if (with_image) r.messages.image_urls.push_back("data:image/png;base64,AAAA");
  return r;
}

routing_request completion(std::string text, std::vector<std::uint32_t> ids = {}) {
  routing_request r;
  r.endpoint = api_endpoint::completions;
  r.prompt_text = std::move(text);
  r.prompt_token_ids = std::move(ids);
  return r;
}

struct plan_case {
  const char* name;
  routing_request request;
  prompt_capabilities set;
  prompt_path path;
  bool images;
};

void PrintTo(const plan_case& c, std::ostream* os) { *os << c.name; }

class prompt_plan_table : public ::testing::TestWithParam<plan_case> {};

TEST_P(prompt_plan_table, picks_the_path_the_set_can_hash) {
  const plan_case& c = GetParam();
  const prompt_plan plan = plan_prompt(c.request, c.set);
  EXPECT_EQ(plan.path, c.path) << to_string(plan.path);
  EXPECT_EQ(plan.images, c.images);
  EXPECT_EQ(plan.needs_hasher(), c.path != prompt_path::none);
}

const prompt_capabilities nothing{};
const prompt_capabilities text_only{.tokenizer = true};
const prompt_capabilities chats{.tokenizer = true, .chat = true};
const prompt_capabilities multimodal{.tokenizer = true, .chat = true, .images = true};

INSTANTIATE_TEST_SUITE_P(
    table, prompt_plan_table,
    ::testing::Values(
        plan_case{"token_ids_hash_without_a_tokenizer", completion("", {1, 2, 3}), nothing, prompt_path::token_ids, false},
        plan_case{"token_ids_win_over_text", completion("abc", {1, 2, 3}), chats, prompt_path::token_ids, false},
        plan_case{"text_needs_a_tokenizer", completion("abc"), nothing, prompt_path::none, false},
        plan_case{"text_with_a_tokenizer", completion("abc"), text_only, prompt_path::text, false},
        plan_case{"empty_text_has_nothing_to_hash", completion(""), text_only, prompt_path::none, false},
        plan_case{"chat_needs_a_way_to_render", chat(false), text_only, prompt_path::none, false},
        plan_case{"chat_with_a_template", chat(false), chats, prompt_path::chat, false},
        plan_case{"images_ignored_where_the_set_is_not_multimodal", chat(true), chats, prompt_path::chat, false},
        plan_case{"images_resolved_where_the_set_is_multimodal", chat(true), multimodal, prompt_path::chat, true},
        plan_case{"a_text_chat_in_a_multimodal_set_resolves_nothing", chat(false), multimodal, prompt_path::chat, false}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace kvr
