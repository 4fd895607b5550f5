#include "core/prompt/prompt_plan.hpp"

#include <algorithm>

namespace kvr {

prompt_plan plan_prompt(const routing_request& request, const prompt_capabilities& set) {
  if (!request.prompt_token_ids.empty()) return {prompt_path::token_ids, false};
  if (request.endpoint == api_endpoint::chat_completions) {
    if (!set.chat) return {};
    return {prompt_path::chat, set.images && !request.messages.image_urls.empty()};
  }
  if (set.tokenizer && !request.prompt_text.empty()) return {prompt_path::text, false};
  return {};
}

std::string_view to_string(prompt_path path) {
  switch (path) {
    case prompt_path::none: return "none";
    case prompt_path::token_ids: return "token_ids";
    case prompt_path::text: return "text";
    case prompt_path::chat: return "chat";
  }
  return "none";
}

}  // namespace kvr
