#include "actors/http/own_routes.hpp"  // first: Asio wants <utility> before it under g++ 12

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actors/http/set_metrics.hpp"
#include "core/common/http_url.hpp"
#include "core/common/json_parse.hpp"

namespace kvr::ingress {
namespace {

[[nodiscard]] local_answer own_error_answer(const api_error& error) {
  return {static_cast<unsigned>(http_status(error.code)), error_body(error)};
}

[[nodiscard]] local_answer json_answer(unsigned status, std::string body) { return {status, std::move(body)}; }

/// `/ready`: some set has a routable worker; `/ready?model=M`: M's set has one.
[[nodiscard]] local_answer ready_answer(http_ingress::impl& server, std::string_view target) {
  if (server.draining.load(std::memory_order_relaxed)) return json_answer(503, R"({"status":"draining"})");
  const auto table = server.current_table();
  if (server.not_ready)
    if (const auto why = server.not_ready(*table)) return json_answer(503, nlohmann::json{{"status", *why}}.dump());
  const auto model = query_parameter(target, "model");
  if (model && table->find(*model) == nullptr)
    return json_answer(404, nlohmann::json{{"status", "unknown model"}, {"model", *model}}.dump());
  for (const worker_set_route& set : table->sets) {
    if (model && set.model != *model) continue;
    for (const auto& worker : set.snapshot->load()->workers)
      if (worker.healthy) return json_answer(200, R"({"status":"ready"})");
  }
  return json_answer(503, R"({"status":"no routable worker"})");
}

[[nodiscard]] nlohmann::json model_object(const worker_set_route& set) {
  return {{"id", set.model}, {"object", "model"}, {"created", 0}, {"owned_by", "kvrouter"}};
}

[[nodiscard]] local_answer models_answer(http_ingress::impl& server) {
  nlohmann::json data = nlohmann::json::array();
  for (const worker_set_route& set : server.current_table()->sets) data.push_back(model_object(set));
  return json_answer(200, nlohmann::json{{"object", "list"}, {"data", std::move(data)}}.dump());
}

/// `GET /v1/models/{id}` (ids such as `Qwen/Qwen3-0.6B` keep their slash).
[[nodiscard]] local_answer model_answer(http_ingress::impl& server, const std::string& id) {
  const auto table = server.current_table();
  if (const worker_set_route* set = table->find(id)) return json_answer(200, model_object(*set).dump());
  return own_error_answer({api_errc::unknown_model, fmt::format("The model `{}` does not exist.", id), "model"});
}

}  // namespace

bool is_own_route(std::string_view path) {
  return path == "/health" || path == "/ready" || path == "/metrics" || path == "/" || path == "/dashboard" ||
         path == "/v1/models" || path.starts_with("/v1/models/") || path.starts_with("/v1/router/");
}

local_answer answer_own_route(http_ingress::impl& server, std::string_view path, std::string_view target) {
  if (path == "/health") return json_answer(200, R"({"status":"ok"})");
  if (path == "/ready") return ready_answer(server, target);
  if (path == "/v1/models") return models_answer(server);
  if (path.starts_with("/v1/models/"))
    return model_answer(server, path_segment_decoded(path.substr(11)).value_or(std::string(path.substr(11))));
  if (path == "/v1/router/sets")
    return json_answer(200, sets_page(*server.current_table(), server.replication_status ? server.replication_status() : std::string()));
  if (path == "/metrics") return {200, server.metrics_text(), "text/plain; version=0.0.4"};
  if (path == "/" || path == "/dashboard") return {200, std::string(status_page_html()), "text/html; charset=utf-8"};
  if (path == "/v1/router/status") return json_answer(200, server.traffic.status_json(*server.current_table(), server.uptime_seconds()));
  return own_error_answer({api_errc::not_found, fmt::format("no route for {}", path), {}});
}

local_answer answer_fault(http_ingress::impl& server, const std::string& body) {
  const auto request = parse_plain_json(body);
  if (!request.is_object() || !request.contains("set") || !request["set"].is_string() || !request.contains("component") ||
      !request["component"].is_string())
    return own_error_answer({api_errc::invalid_request, R"(expected {"set": NAME, "component": NAME})", {}});
  if (server.inject_fault) server.inject_fault(request["set"].get<std::string>(), request["component"].get<std::string>());
  return json_answer(202, R"({"status":"sent"})");
}

}  // namespace kvr::ingress
