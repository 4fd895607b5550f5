#include "core/migration/continuation.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/migration/sse_events.hpp"

namespace kvr {
namespace {

using json = nlohmann::json;

/// A greedy "model": its next token is a function of every token before it, as a real one's is,
/// so a continuation from the right ids goes on exactly as the first worker would have.
std::uint32_t next_token(const std::vector<std::uint32_t>& context) {
  std::uint64_t h = 1469598103934665603ull;
  for (const std::uint32_t id : context) h = (h ^ id) * 1099511628211ull;
  return static_cast<std::uint32_t>(100 + h % 50);
}
std::string text_of(std::uint32_t id) { return " w" + std::to_string(id); }

/// The SSE stream an engine that reports token ids sends for `prompt` (a chat or a completion),
/// `count` tokens long; `id` is its answer's id.
std::vector<std::string> engine_events(const std::vector<std::uint32_t>& prompt, std::uint32_t count, bool chat,
                                       const std::string& id, std::int64_t created) {
  std::vector<std::string> events;
  std::vector<std::uint32_t> context = prompt;
  const std::string object = chat ? "chat.completion.chunk" : "text_completion";
  json first = {{"id", id}, {"object", object}, {"created", created}, {"model", "engine-model"}};
  if (chat) {
    first["prompt_token_ids"] = prompt;
    first["choices"] = json::array({{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"token_ids", json::array()}}});
  } else {
    first["choices"] = json::array({{{"index", 0}, {"text", ""}, {"prompt_token_ids", prompt}}});
  }
  events.push_back(first.dump());
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::uint32_t token = next_token(context);
    context.push_back(token);
    json choice = {{"index", 0}, {"token_ids", {token}}, {"finish_reason", i + 1 == count ? json("length") : json(nullptr)}};
    if (chat) choice["delta"] = {{"content", text_of(token)}};
    else choice["text"] = text_of(token);
    events.push_back(json{{"id", id}, {"object", object}, {"created", created}, {"model", "engine-model"}, {"choices", {choice}}}.dump());
  }
  events.push_back(json{{"id", id},
                        {"object", object},
                        {"created", created},
                        {"model", "engine-model"},
                        {"choices", json::array()},
                        {"usage", {{"prompt_tokens", prompt.size()}, {"completion_tokens", count}}}}
                       .dump());
  events.push_back("[DONE]");
  return events;
}

/// What a client makes of SSE bytes: the generated text, the role deltas, usage, finish reason.
struct client_view {
  std::string text;
  int roles = 0;
  int usages = 0;
  std::int64_t completion_tokens = -1;
  std::string finish_reason;
  std::vector<std::string> ids;
  bool done = false;
  bool token_ids_seen = false;
};
void read_as_client(std::string_view data, bool chat, client_view& view) {
  if (data == "[DONE]") {
    view.done = true;
    return;
  }
  const json event = json::parse(data);
  view.ids.push_back(event["id"].get<std::string>());
  if (event.contains("usage") && !event["usage"].is_null()) {
    ++view.usages;
    view.completion_tokens = event["usage"]["completion_tokens"].get<std::int64_t>();
  }
  if (event.contains("prompt_token_ids")) view.token_ids_seen = true;
  for (const json& choice : event["choices"]) {
    if (choice.contains("token_ids") || choice.contains("prompt_token_ids")) view.token_ids_seen = true;
    if (chat) {
      if (choice["delta"].contains("role")) ++view.roles;
      view.text += choice["delta"].value("content", "");
    } else {
      view.text += choice.value("text", "");
    }
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) view.finish_reason = choice["finish_reason"];
  }
}

void continues_a_stream_cut_after(std::uint32_t sent, bool chat) {
  const std::vector<std::uint32_t> prompt{11, 12, 13, 14};
  constexpr std::uint32_t answer_tokens = 12;
  const json request = chat ? json{{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                   {"max_completion_tokens", answer_tokens}, {"stream", true}, {"temperature", 0},
                                   {"seed", 7}, {"stream_options", {{"include_usage", true}}}}
                            : json{{"model", "m"}, {"prompt", "hi"}, {"max_tokens", answer_tokens}, {"stream", true},
                                   {"temperature", 0}, {"seed", 7}, {"stream_options", {{"include_usage", true}}}};

  client_view whole;  // the answer as one worker gives it
  for (const auto& event : engine_events(prompt, answer_tokens, chat, "first", 1700))
    read_as_client(without_token_ids(event), chat, whole);

  // The first worker dies after `sent` tokens (its first event plus `sent` token chunks went out).
  answer_ledger ledger;
  client_view migrated;
  const auto first = engine_events(prompt, answer_tokens, chat, "first", 1700);
  for (std::uint32_t i = 0; i <= sent; ++i) {
    ledger.observe(first[i]);
    read_as_client(without_token_ids(first[i]), chat, migrated);
  }
  const auto next = continue_answer(request, ledger, 0);
  ASSERT_TRUE(next) << to_string(next.error());
  ASSERT_FALSE(next->nothing_left());
  EXPECT_EQ(next->carried_tokens, sent);
  const json body = json::parse(next->body);
  std::vector<std::uint32_t> continued_prompt = body["prompt"].get<std::vector<std::uint32_t>>();
  EXPECT_EQ(body["max_tokens"], answer_tokens - sent);
  EXPECT_EQ(body["seed"], 7);
  EXPECT_EQ(body["temperature"], 0);
  EXPECT_EQ(body["return_token_ids"], true);
  EXPECT_FALSE(body.contains("messages"));

  // The second worker answers the continuation; its events are rewritten into the client's stream.
  continuation_relay relay(ledger, {.token_ids = false, .usage = true}, next->carried_tokens);
  sse_reader reader;
  for (const auto& event : engine_events(continued_prompt, answer_tokens - sent, false, "second", 9999)) {
    const auto step = relay.relay(event);
    ASSERT_FALSE(step.failed);
    reader.feed(step.to_client, [&](std::string_view data) { read_as_client(data, chat, migrated); });
  }
  EXPECT_EQ(migrated.text, whole.text);
  EXPECT_EQ(migrated.roles, chat ? 1 : 0) << "no second role delta";
  EXPECT_EQ(migrated.usages, 1);
  EXPECT_EQ(migrated.completion_tokens, answer_tokens) << "usage counts the whole answer";
  EXPECT_EQ(migrated.finish_reason, "length");
  EXPECT_TRUE(migrated.done);
  EXPECT_FALSE(migrated.token_ids_seen) << "the client did not ask for token ids";
  for (const auto& id : migrated.ids) EXPECT_EQ(id, "first");
}

TEST(continuation, a_chat_cut_mid_stream_continues_on_another_worker_to_the_same_answer) {
  for (std::uint32_t sent : {0u, 1u, 5u, 11u}) {
    SCOPED_TRACE(sent);
    continues_a_stream_cut_after(sent, true);
  }
}

TEST(continuation, a_completion_cut_mid_stream_continues_on_another_worker_to_the_same_answer) {
  for (std::uint32_t sent : {0u, 3u, 11u}) {
    SCOPED_TRACE(sent);
    continues_a_stream_cut_after(sent, false);
  }
}

TEST(continuation, requests_that_cannot_be_continued_say_why) {
  EXPECT_EQ(refuses_migration(json{{"n", 2}}), migration_refusal::several_choices);
  EXPECT_EQ(refuses_migration(json{{"best_of", 3}}), migration_refusal::several_choices);
  EXPECT_EQ(refuses_migration(json{{"logprobs", true}}), migration_refusal::logprobs);
  EXPECT_EQ(refuses_migration(json{{"logprobs", 2}}), migration_refusal::logprobs);
  EXPECT_EQ(refuses_migration(json{{"top_logprobs", 2}}), migration_refusal::logprobs);
  EXPECT_EQ(refuses_migration(json{{"response_format", {{"type", "json_schema"}}}}), migration_refusal::structured_output);
  EXPECT_EQ(refuses_migration(json{{"guided_regex", "a+"}}), migration_refusal::structured_output);
  EXPECT_EQ(refuses_migration(json{{"structured_outputs", {{"json", json::object()}}}}), migration_refusal::structured_output);
  EXPECT_EQ(refuses_migration(json{{"n", 1}, {"logprobs", false}, {"response_format", {{"type", "text"}}}, {"logit_bias", nullptr}}),
            std::nullopt);
}

TEST(continuation, an_answer_is_not_continued_past_a_tool_call_without_its_ids_or_beyond_the_length_bound) {
  const json chat = {{"model", "m"}, {"messages", json::array()}, {"stream", true}};
  answer_ledger tool;
  tool.observe(R"({"id":"c","object":"chat.completion.chunk","prompt_token_ids":[1],"choices":[{"index":0,"delta":{"tool_calls":[{"index":0}]},"token_ids":[5]}]})");
  EXPECT_EQ(continue_answer(chat, tool, 0).error(), migration_refusal::tool_call);

  answer_ledger no_ids;
  no_ids.observe(R"({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"x"}}]})");
  EXPECT_EQ(continue_answer(chat, no_ids, 0).error(), migration_refusal::no_token_ids);

  answer_ledger longer;
  longer.observe(R"({"id":"c","object":"chat.completion.chunk","prompt_token_ids":[1,2,3],"choices":[{"index":0,"delta":{"content":"x"},"token_ids":[4,5]}]})");
  EXPECT_EQ(continue_answer(chat, longer, 4).error(), migration_refusal::too_long);
  EXPECT_TRUE(continue_answer(chat, longer, 5));
  EXPECT_FALSE(json::parse(continue_answer(chat, longer, 0)->body).contains("max_tokens")) << "a chat without a limit keeps none";
}

TEST(continuation, an_answer_that_used_up_its_tokens_only_needs_its_end) {
  answer_ledger ledger;
  ledger.observe(R"({"id":"cmpl-9","object":"text_completion","created":3,"model":"m","choices":[{"index":0,"text":" a b","prompt_token_ids":[1],"token_ids":[])"
                 R"(}]})");
  ledger.observe(R"({"id":"cmpl-9","object":"text_completion","choices":[{"index":0,"text":" c","token_ids":[7,8]}]})");
  const auto none_left = continue_answer(json{{"model", "m"}, {"prompt", "p"}, {"max_tokens", 2}}, ledger, 0);
  ASSERT_TRUE(none_left);
  EXPECT_TRUE(none_left->nothing_left());
  const auto sixteen = continue_answer(json{{"model", "m"}, {"prompt", "p"}, {"min_tokens", 5}}, ledger, 0);
  ASSERT_TRUE(sixteen);
  EXPECT_EQ(json::parse(sixteen->body)["max_tokens"], 14) << "a completion's default limit is 16 tokens";
  EXPECT_EQ(json::parse(sixteen->body)["min_tokens"], 3);

  continuation_relay relay(ledger, {.token_ids = false, .usage = true}, 2);
  client_view view;
  sse_reader reader;
  reader.feed(relay.finish("length"), [&](std::string_view data) { read_as_client(data, false, view); });
  EXPECT_EQ(view.finish_reason, "length");
  EXPECT_EQ(view.completion_tokens, 2);
  EXPECT_TRUE(view.done);
}

TEST(continuation, an_error_event_from_the_continuing_worker_is_its_failure_and_ids_go_on_when_asked_for) {
  answer_ledger ledger;
  ledger.observe(R"({"id":"c","object":"chat.completion.chunk","created":1,"model":"m","prompt_token_ids":[1],"choices":[{"index":0,"delta":{"role":"assistant","content":""},"token_ids":[]}]})");
  continuation_relay relay(ledger, {.token_ids = true, .usage = false}, 0);
  const auto step = relay.relay(R"({"id":"x","object":"text_completion","choices":[{"index":0,"text":" y","token_ids":[42]}]})");
  EXPECT_FALSE(step.failed);
  EXPECT_NE(step.to_client.find(R"("token_ids":[42])"), std::string::npos) << step.to_client;
  EXPECT_EQ(ledger.generated_ids(), (std::vector<std::uint32_t>{42})) << "a second migration continues from here";
  EXPECT_TRUE(relay.relay(R"({"error":{"message":"boom"}})").failed);
  EXPECT_TRUE(relay.relay("garbage").failed);
}

TEST(continuation, token_ids_kvrouter_asked_for_are_stripped_and_the_rest_keeps_its_order) {
  EXPECT_EQ(without_token_ids(R"({"id":"a","prompt_token_ids":[1],"choices":[{"index":0,"token_ids":[2],"delta":{"content":"x"}}]})"),
            R"({"id":"a","choices":[{"index":0,"delta":{"content":"x"}}]})");
  EXPECT_EQ(without_token_ids("[DONE]"), "[DONE]");
}

}  // namespace
}  // namespace kvr

namespace kvr {
namespace {

TEST(continuation, token_ids_are_cut_from_the_bytes_as_the_tree_would_remove_them) {
  for (const std::string_view event :
       {R"({"id":"a","prompt_token_ids":[1, 2],"choices":[{"index":0,"token_ids":[2],"delta":{"content":"x, \"token_ids\": [9]"}}]})",
        R"({"prompt_token_ids":null , "id":"a","choices":[{"token_ids":[],"index":0},{"index":1,"prompt_token_ids":[5],"token_ids":[6,7]}]})",
        R"({"choices":[{"delta":{"token_ids":[1]},"index":0}],"usage":{"prompt_token_ids":[3]}})",
        R"({"id":"\"","choices":[{"token\u005fids":[1]}]})",
        R"({"choices":[{"token_ids":{"not":"ids"}}]})"}) {
    SCOPED_TRACE(event);
    nlohmann::ordered_json tree = nlohmann::ordered_json::parse(event);
    tree.erase("prompt_token_ids");
    for (auto& choice : tree["choices"]) {
      choice.erase("token_ids");
      choice.erase("prompt_token_ids");
    }
    EXPECT_EQ(nlohmann::ordered_json::parse(without_token_ids(event)), tree);
  }
  EXPECT_EQ(without_token_ids(R"({"a":1, "prompt_token_ids":[1,2], "b":2})"), R"({"a":1, "b":2})") << "other bytes as they were";
}

}  // namespace
}  // namespace kvr
