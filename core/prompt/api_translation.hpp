#pragma once
/// The prompts of OpenAI's Responses API (`/v1/responses`) and Anthropic's Messages API
/// (`/v1/messages`) as the chat the engine renders them to, so they route by prefix like chat
/// completions. vLLM turns `instructions` / `system` into a first system message and each input
/// message into a chat message whose text parts are joined with newlines; where a body holds
/// anything whose rendering is less certain (tools, function calls and their outputs,
/// reasoning items, images, documents), there is no translation and the request routes on load.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace kvr {

/// A chat-completions body (`model`, `stream`, `user`, `messages`) that renders as `body` does;
/// nullopt when that is not certain, or the body is not a JSON object of that API's shape. The
/// body is read on demand and its strings copied as written: the result is about the size of
/// the body, and nothing else of it is held. `body` should be readable up to `capacity` >=
/// its size + request_parser::padding (else it is copied first).
[[nodiscard]] std::optional<std::string> responses_as_chat(std::string_view body, std::size_t capacity = 0);
[[nodiscard]] std::optional<std::string> messages_as_chat(std::string_view body, std::size_t capacity = 0);

}  // namespace kvr
