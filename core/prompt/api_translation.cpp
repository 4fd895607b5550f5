#include "core/prompt/api_translation.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/common/json_parse.hpp"

namespace kvr {
namespace {

using json = nlohmann::json;

std::optional<json> parse_object(std::string_view body) {
  auto document = parse_json<json>(body);
  if (!document || !document->is_object()) return std::nullopt;
  return std::move(*document);
}

/// A message's content as one string: a string, or text parts of the given types joined with
/// newlines (how vLLM hands them to a string-format chat template); nullopt for anything else.
std::optional<std::string> text_of(const json& content, std::initializer_list<std::string_view> text_types) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array() || content.empty()) return std::nullopt;
  std::string text;
  bool first = true;
  for (const json& part : content) {
    if (!part.is_object() || !part.contains("text") || !part["text"].is_string()) return std::nullopt;
    const std::string type = part.value("type", "");
    if (std::find(text_types.begin(), text_types.end(), type) == text_types.end()) return std::nullopt;
    if (!first) text += '\n';
    text += part["text"].get<std::string>();
    first = false;
  }
  return text;
}

std::string chat_body(const json& request, json messages) {
  json chat{{"messages", std::move(messages)}};
  if (request.contains("model") && request["model"].is_string()) chat["model"] = request["model"];
  if (request.contains("stream") && request["stream"].is_boolean()) chat["stream"] = request["stream"];
  if (request.contains("user") && request["user"].is_string()) chat["user"] = request["user"];
  return chat.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::optional<std::string> responses_as_chat(std::string_view body) {
  auto request = parse_object(body);
  if (!request || request->contains("tools") || request->contains("previous_response_id")) return std::nullopt;
  json messages = json::array();
  if (const auto instructions = request->find("instructions"); instructions != request->end() && !instructions->is_null()) {
    if (!instructions->is_string()) return std::nullopt;
    messages.push_back({{"role", "system"}, {"content", *instructions}});
  }
  const auto input = request->find("input");
  if (input == request->end()) return std::nullopt;
  if (input->is_string()) {
    messages.push_back({{"role", "user"}, {"content", *input}});
  } else if (input->is_array() && !input->empty()) {
    for (const json& item : *input) {
      if (!item.is_object() || item.value("type", "message") != "message") return std::nullopt;
      const std::string role = item.value("role", "");
      if (role != "user" && role != "assistant" && role != "system" && role != "developer") return std::nullopt;
      auto text = text_of(item.value("content", json()), {"input_text", "output_text", "text"});
      if (!text) return std::nullopt;
      messages.push_back({{"role", role == "developer" ? "system" : role}, {"content", std::move(*text)}});
    }
  } else {
    return std::nullopt;
  }
  return chat_body(*request, std::move(messages));
}

std::optional<std::string> messages_as_chat(std::string_view body) {
  auto request = parse_object(body);
  if (!request || request->contains("tools")) return std::nullopt;
  json messages = json::array();
  if (const auto system = request->find("system"); system != request->end() && !system->is_null()) {
    auto text = text_of(*system, {"text"});
    if (!text) return std::nullopt;
    messages.push_back({{"role", "system"}, {"content", std::move(*text)}});
  }
  const auto turns = request->find("messages");
  if (turns == request->end() || !turns->is_array() || turns->empty()) return std::nullopt;
  for (const json& turn : *turns) {
    if (!turn.is_object()) return std::nullopt;
    const std::string role = turn.value("role", "");
    if (role != "user" && role != "assistant") return std::nullopt;
    auto text = text_of(turn.value("content", json()), {"text"});
    if (!text) return std::nullopt;
    messages.push_back({{"role", role}, {"content", std::move(*text)}});
  }
  return chat_body(*request, std::move(messages));
}

}  // namespace kvr
