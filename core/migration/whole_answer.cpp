#include "core/migration/whole_answer.hpp"

#include <algorithm>
#include <array>

#include <nlohmann/json.hpp>

#include "core/migration/dom_fields.hpp"

namespace kvr {

using namespace dom_fields;
using ojson = nlohmann::ordered_json;

void whole_answer::add(std::string_view data) {
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  thread_local simdjson::dom::parser parser;
  element chunk;
  if (parser.parse(data.data(), data.size(), true).get(chunk) != simdjson::SUCCESS || chunk.type() != element_type::OBJECT) return;
  if (!started_) {
    started_ = true;
    if (const auto id = member(chunk, "id"); id && id->is_string()) id_ = std::string(std::string_view(*id));
    if (const auto created = member(chunk, "created"); created && created->type() == element_type::INT64) created_ = std::int64_t(*created);
    if (const auto model = member(chunk, "model"); model && model->is_string()) model_ = std::string(std::string_view(*model));
    chat_ = string_or_empty(member(chunk, "object")) == "chat.completion.chunk";
    for (const simdjson::dom::key_value_pair field : simdjson::dom::object(chunk)) {
      static constexpr std::array<std::string_view, 7> own{"id", "object", "created", "model", "choices", "usage", "prompt_token_ids"};
      if (std::find(own.begin(), own.end(), field.key) != own.end()) continue;
      if (std::find_if(extras_.begin(), extras_.end(), [&](const auto& e) { return e.first == field.key; }) == extras_.end())
        extras_.emplace_back(std::string(field.key), simdjson::minify(field.value));
    }
  }
  if (const auto usage = member(chunk, "usage"); usage && usage->type() == element_type::OBJECT) usage_ = simdjson::minify(*usage);
  if (const auto ids = member(chunk, "prompt_token_ids"); ids && !prompt_token_ids_) (void)append_ids(*ids, prompt_token_ids_.emplace());
  const auto choices = member(chunk, "choices");
  if (!choices || choices->type() != element_type::ARRAY) return;
  for (const element choice : simdjson::dom::array(*choices)) {
    if (choice.type() != element_type::OBJECT) continue;
    if (const auto delta = member(choice, "delta"); delta && delta->type() == element_type::OBJECT) {
      if (const auto role = string_or_empty(member(*delta, "role")); !role.empty()) role_ = role;
      content_ += string_or_empty(member(*delta, "content"));
      reasoning_ += string_or_empty(member(*delta, "reasoning_content"));
      reasoning_ += string_or_empty(member(*delta, "reasoning"));
    } else {
      content_ += string_or_empty(member(choice, "text"));
    }
    if (const auto ids = member(choice, "prompt_token_ids"); ids && !prompt_token_ids_) (void)append_ids(*ids, prompt_token_ids_.emplace());
    if (const auto ids = member(choice, "token_ids")) {
      token_ids_seen_ = true;
      (void)append_ids(*ids, token_ids_);
    }
    if (const auto finish = member(choice, "finish_reason"); finish && finish->is_string()) finish_reason_ = std::string_view(*finish);
    if (const auto stop = member(choice, "stop_reason")) stop_reason_ = simdjson::minify(*stop);
  }
}

std::string whole_answer::body() const {
  ojson choice = {{"index", 0}};
  if (chat_) {
    ojson message = {{"role", role_}, {"content", content_}};
    if (!reasoning_.empty()) message["reasoning_content"] = reasoning_;
    choice["message"] = std::move(message);
  } else {
    choice["text"] = content_;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason_ ? ojson(*finish_reason_) : ojson(nullptr);
  choice["stop_reason"] = ojson::parse(stop_reason_, nullptr, false);
  if (!chat_ && prompt_token_ids_) choice["prompt_token_ids"] = *prompt_token_ids_;
  if (token_ids_seen_) choice["token_ids"] = token_ids_;
  ojson out = ojson::object();
  if (id_) out["id"] = *id_;
  out["object"] = chat_ ? "chat.completion" : "text_completion";
  if (created_) out["created"] = *created_;
  if (model_) out["model"] = *model_;
  for (const auto& [key, value] : extras_) out[key] = ojson::parse(value, nullptr, false);
  out["choices"] = ojson::array({std::move(choice)});
  if (chat_ && prompt_token_ids_) out["prompt_token_ids"] = *prompt_token_ids_;
  out["usage"] = ojson::parse(usage_, nullptr, false);
  return out.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

}  // namespace kvr
