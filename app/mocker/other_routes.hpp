#pragma once
/// The engine routes beyond completions that a router passes through, answered minimally in
/// vLLM's shapes so tests can see each reach a worker with its method, query and body intact:
/// `/v1/embeddings`, `/tokenize`, `/v1/responses` (also streamed), `/v1/messages`, and for any
/// other route an echo of the request.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "app/mocker/openai_mock.hpp"

namespace kvr::mocker {

struct route_answer {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

struct other_request {
  std::string_view method;
  std::string_view target;  ///< path and query, as sent
  std::string_view path;
  std::string_view content_type;
  std::string_view body;
  std::vector<std::pair<std::string, std::string>> x_headers;  ///< its `x-*` fields, names lowercased
};

/// The answer to `request`, a route the mocker has no engine behaviour for.
[[nodiscard]] route_answer answer_other_route(const other_request& request, const std::string& model,
                                              const prompt_tokenizer& prompts, std::uint32_t max_model_len);

}  // namespace kvr::mocker
