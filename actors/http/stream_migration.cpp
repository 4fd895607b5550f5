#include "actors/http/stream_migration.hpp"

#include <array>

#include <nlohmann/json.hpp>

#include "core/common/json_parse.hpp"
#include "core/disagg/json_members.hpp"

namespace kvr::ingress {

void stream_migration::reset() {
  leg_ = leg::off;
  passive_ = false;
  rewritten_ = false;
  client_usage_ = false;
  whole_ = false;
  gathered_reader_.reset();
  gathered_ = whole_answer{};
  client_body_ = nullptr;
  sent_body_.clear();
  migrations_ = 0;
  ids_from_text_ = false;
  reader_.reset();
  ledger_ = answer_ledger{};
  continuation_ = continuation{};
  relay_.reset();
}

void stream_migration::arm(const std::string& client_body, const routing_request& request, const router_config& config) {
  reset();
  const bool generative = request.endpoint == api_endpoint::chat_completions || request.endpoint == api_endpoint::completions;
  if (config.migration_limit == 0 || !generative) return;
  whole_ = !request.stream;
  if (whole_ && (!config.migration_whole_answers || !whole_answer_can_be_followed(client_body))) return reset();
  client_body_ = &client_body;
  limit_ = config.migration_limit;
  max_seq_len_ = config.migration_max_seq_len;
  // The few members read here are scanned over the body's bytes; the body is parsed whole only
  // if its stream needs continuing.
  const auto member_is = [&](std::string_view key, std::string_view value) {
    const auto raw = member_value(client_body, key);
    return raw && *raw == value;
  };
  if (const auto options = member_value(client_body, "stream_options"); options && !whole_) {
    const auto parsed = parse_plain_json(*options);
    client_usage_ = parsed.is_object() && parsed.value("include_usage", false) == true;
  }
  client_usage_ = client_usage_ || whole_;  // a whole answer has its usage
  rewritten_ = !member_is("return_token_ids", "true");
  std::vector<member_edit> edits;
  if (rewritten_) edits.push_back({"return_token_ids", "true"});
  if (whole_) {
    edits.push_back({"stream", "true"});
    edits.push_back({"stream_options", R"({"include_usage":true})"});
  }
  if (!edits.empty()) {
    auto body = edit_members(client_body, edits);
    if (!body) return reset();  // not one JSON object after all: the worker judges it, nothing to continue
    sent_body_ = std::move(*body);
  }
  leg_ = leg::first;
}

void stream_migration::on_head(unsigned status, bool event_stream) {
  // Only a 200 event stream can be followed and continued in place; anything else passes as it is.
  passive_ = status != 200 || !event_stream;
  if (passive_ && leg_ == leg::first) leg_ = leg::off;
}

body_filter::result stream_migration::filter(std::string_view bytes) {
  if (leg_ == leg::off || passive_ || reader_.overflowed()) return {bytes, false};
  out_.clear();
  bool failed = false;
  reader_.feed(bytes, [&](std::string_view data) {
    if (failed) return;  // nothing after the failure reaches the client
    if (leg_ == leg::continuation) {
      auto step = relay_->relay(data);
      if (whole_) gather(step.to_client);
      else out_ += step.to_client;
      failed = step.failed;
      return;
    }
    ledger_.observe(data);
    if (ledger_.engine_error()) {
      failed = true;
      return;
    }
    const std::string event = rewritten_ && data != "[DONE]" ? without_token_ids(data) : std::string(data);
    if (whole_) return gathered_.add(event);
    out_ += "data: ";
    out_ += event;
    out_ += "\n\n";
  });
  // An event too long to follow ends the following: the first leg's answer is relayed as it
  // is from here (and can no longer be continued); a continuation's is cut, and so is a
  // gathered answer (its events cannot be gathered).
  if (reader_.overflowed()) {
    if (leg_ == leg::continuation || whole_) return {out_, true};
    leg_ = leg::off;
  }
  return {out_, failed};
}

void stream_migration::gather(std::string_view events) {
  gathered_reader_.feed(events, [&](std::string_view data) { gathered_.add(data); });
}

std::expected<continuation, migration_refusal> stream_migration::plan(const prompt_tokenizers& prompts, std::size_t max_tokens) {
  if (migrations_ >= limit_) return std::unexpected(migration_refusal::limit_reached);
  if (reader_.overflowed()) return std::unexpected(migration_refusal::unreadable_stream);
  ++migrations_;
  const auto body = parse_plain_json(*client_body_);
  ids_from_text_ = false;
  if ((ledger_.prompt_ids().empty() || !ledger_.ids_complete()) && !refuses_migration(body))
    ids_from_text_ = rebuild_ids_from_text(ledger_, *client_body_, prompts, max_tokens);
  auto next = continue_answer(body, ledger_, max_seq_len_);
  if (next) continuation_ = *next;
  return next;
}

routing_request stream_migration::continuation_request(const std::string& model) const {
  routing_request request;
  request.endpoint = api_endpoint::completions;
  request.model = model;
  request.stream = true;
  request.prompt_token_ids = ledger_.prompt_ids();
  request.prompt_token_ids.insert(request.prompt_token_ids.end(), ledger_.generated_ids().begin(), ledger_.generated_ids().end());
  request.prompt_tokens = static_cast<std::uint32_t>(request.prompt_token_ids.size());
  return request;
}

void stream_migration::start_continuation(continuation next) {
  continuation_ = std::move(next);
  leg_ = leg::continuation;
  passive_ = false;
  reader_.reset();
  relay_.emplace(ledger_, continuation_relay::wants{.token_ids = !rewritten_, .usage = client_usage_}, continuation_.carried_tokens);
}

std::string stream_migration::finished_events() {
  continuation_relay relay(ledger_, {.token_ids = !rewritten_, .usage = client_usage_}, continuation_.carried_tokens);
  return relay.finish("length");
}

std::string stream_migration::error_events(std::string_view why) const {
  const nlohmann::json error = {
      {"error", {{"message", why}, {"type", "worker_failed"}, {"param", nullptr}, {"code", http_status(api_errc::worker_failed)}}}};
  return "data: " + error.dump() + "\n\ndata: [DONE]\n\n";
}

}  // namespace kvr::ingress
