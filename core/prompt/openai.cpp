#include "core/prompt/openai.hpp"

#include <limits>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "core/common/json_shape.hpp"
#include "core/common/json_top_level.hpp"
#include "core/prompt/token_id_array.hpp"

namespace kvr {
namespace {

using namespace simdjson;

std::unexpected<api_error> invalid(std::string message, std::string param = {}) {
  return std::unexpected(api_error{api_errc::invalid_request, std::move(message), std::move(param)});
}

/// A string field that could not be read: the wrong type, or a string JSON cannot hold as text
/// (a bad escape, a lone UTF-16 surrogate, invalid UTF-8), named as such.
std::unexpected<api_error> bad_string(simdjson::error_code error, std::string type_message, std::string param) {
  // Each message is formatted before `param` moves: the order of a call's arguments is unspecified.
  if (error == simdjson::STRING_ERROR) {
    std::string message = fmt::format("{}: a string has a bad escape or a lone UTF-16 surrogate (\\uD800-\\uDFFF unpaired)", param);
    return invalid(std::move(message), std::move(param));
  }
  if (error == simdjson::UTF8_ERROR) {
    std::string message = fmt::format("{}: a string is not valid UTF-8", param);
    return invalid(std::move(message), std::move(param));
  }
  return invalid(std::move(type_message), std::move(param));
}

std::string_view type_of(api_errc code) {
  switch (code) {
    case api_errc::invalid_json:
    case api_errc::invalid_request:
    case api_errc::invalid_api_key:
    case api_errc::body_too_large:
    case api_errc::method_not_allowed:
    case api_errc::not_found: return "invalid_request_error";
    case api_errc::unknown_model: return "invalid_request_error";
    case api_errc::too_many_requests:
    case api_errc::queue_full: return "rate_limit_error";
    case api_errc::queue_timeout: return "service_unavailable";
    case api_errc::no_worker_available:
    case api_errc::overloaded: return "service_unavailable";
    case api_errc::worker_failed:
    case api_errc::worker_timeout: return "upstream_error";
  }
  return "api_error";
}

std::string_view code_of(api_errc code) {
  switch (code) {
    case api_errc::invalid_json: return "invalid_json";
    case api_errc::invalid_request: return "invalid_request";
    case api_errc::invalid_api_key: return "invalid_api_key";
    case api_errc::not_found: return "not_found";
    case api_errc::unknown_model: return "model_not_found";
    case api_errc::method_not_allowed: return "method_not_allowed";
    case api_errc::body_too_large: return "body_too_large";
    case api_errc::too_many_requests: return "too_many_requests";
    case api_errc::queue_full: return "queue_full";
    case api_errc::queue_timeout: return "queue_timeout";
    case api_errc::no_worker_available: return "no_worker_available";
    case api_errc::overloaded: return "overloaded";
    case api_errc::worker_failed: return "worker_failed";
    case api_errc::worker_timeout: return "worker_timeout";
  }
  return "error";
}

/// `content`: a string, or an array of parts (`text`, `image_url`).
std::expected<void, api_error> read_content(ondemand::value content, chat_messages& messages) {
  ondemand::json_type type;
  if (content.type().get(type)) return invalid("messages: malformed content", "messages");
  if (type == ondemand::json_type::null) return {};
  if (type == ondemand::json_type::string) {
    std::string_view text;
    if (auto error = content.get_string().get(text)) return bad_string(error, "messages: content must be a string or an array", "messages");
    messages.text_bytes += text.size();
    return {};
  }
  ondemand::array parts;
  if (content.get_array().get(parts)) return invalid("messages: content must be a string or an array", "messages");
  for (auto part_result : parts) {
    ondemand::object part;
    if (part_result.get_object().get(part)) return invalid("messages: each content part must be an object", "messages");
    std::string_view part_type, text, url;
    for (auto field : part) {
      std::string_view key;
      if (field.unescaped_key().get(key)) return invalid("messages: malformed content part", "messages");
      if (key == "type") {
        if (auto error = field.value().get_string().get(part_type)) return bad_string(error, "messages: a part's type must be a string", "messages");
      } else if (key == "text") {
        if (auto error = field.value().get_string().get(text)) return bad_string(error, "messages: a text part's text must be a string", "messages");
        messages.text_bytes += text.size();
      } else if (key == "image_url") {
        ondemand::value image = field.value();
        ondemand::json_type image_type;
        if (image.type().get(image_type)) return invalid("messages: malformed image_url", "messages");
        if (image_type == ondemand::json_type::string) {
          if (auto error = image.get_string().get(url)) return bad_string(error, "messages: malformed image_url", "messages");
        } else {
          ondemand::object image_object;
          if (image.get_object().get(image_object)) return invalid("messages: image_url must be an object", "messages");
          if (auto error = image_object["url"].get_string().get(url)) return bad_string(error, "messages: image_url.url must be a string", "messages");
        }
        messages.image_urls.emplace_back(url);
      }
    }
  }
  return {};
}

std::expected<void, api_error> read_messages(ondemand::value value, routing_request& request) {
  ondemand::array messages;
  if (value.get_array().get(messages)) return invalid("messages must be an array", "messages");
  for (auto item : messages) {
    ondemand::object object;
    if (item.get_object().get(object)) return invalid("each message must be an object", "messages");
    chat_messages& read = request.messages;
    std::string_view role;
    for (auto field : object) {
      std::string_view key;
      if (field.unescaped_key().get(key)) return invalid("messages: malformed key", "messages");
      if (key == "role") {
        if (auto error = field.value().get_string().get(role)) return bad_string(error, "messages: role must be a string", "messages");
      } else if (key == "content") {
        if (auto content = read_content(field.value(), read); !content) return content;
      }
    }
    if (role.empty()) return invalid("each message needs a role", "messages");
    ++read.count;
    if (role == "user" || role == "assistant") ++read.user_or_assistant;
  }
  if (request.messages.count == 0) return invalid("messages must not be empty", "messages");
  return {};
}

/// `prompt`: a string, an array of strings (the first routes), an array of token ids, or an
/// array of token-id arrays (the first routes).
/// A prompt field (`prompt`; `text` or `input_ids` of /generate, named by `field` in errors):
/// a string, strings, token ids, or arrays of token ids; of a batch, the first routes.
std::expected<void, api_error> read_prompt(ondemand::value value, routing_request& request, const std::string& field) {
  ondemand::json_type type;
  if (value.type().get(type)) return invalid("malformed " + field, field);
  if (type == ondemand::json_type::string) {
    std::string_view text;
    if (auto error = value.get_string().get(text)) return bad_string(error, "malformed " + field, field);
    request.prompt_text = text;
    return {};
  }
  ondemand::array items;
  if (type != ondemand::json_type::array || value.get_array().get(items))
    return invalid(field + " must be a string, an array of strings or an array of token ids", field);
  bool first = true;
  for (auto item : items) {
    ondemand::json_type item_type;
    if (item.type().get(item_type)) return invalid("malformed " + field, field);
    if (item_type == ondemand::json_type::number) {
      std::uint64_t token = 0;
      if (item.get_uint64().get(token) || token > std::numeric_limits<std::uint32_t>::max())
        return invalid(field + " token ids must be integers in 0..2^32-1", field);
      request.prompt_token_ids.push_back(static_cast<std::uint32_t>(token));
    } else if (item_type == ondemand::json_type::string) {
      std::string_view text;
      if (auto error = item.get_string().get(text)) return bad_string(error, "malformed " + field, field);
      if (first) request.prompt_text = text;
    } else if (item_type == ondemand::json_type::array) {
      ondemand::array tokens;
      if (item.get_array().get(tokens)) return invalid("malformed " + field, field);
      for (auto token_value : tokens) {
        std::uint64_t token = 0;
        if (token_value.get_uint64().get(token) || token > std::numeric_limits<std::uint32_t>::max())
          return invalid(field + " token ids must be integers in 0..2^32-1", field);
        if (first) request.prompt_token_ids.push_back(static_cast<std::uint32_t>(token));
      }
    } else {
      return invalid(field + " must be a string, an array of strings or an array of token ids", field);
    }
    first = false;
  }
  return {};
}

std::unexpected<api_error> bad_json(std::string_view what) {
  return std::unexpected(api_error{api_errc::invalid_json, fmt::format("the body is not valid JSON: {}", what), {}});
}

/// The fields every reading of a body takes (`model`, `stream`, `user`): true if `key` was one.
std::expected<bool, api_error> read_envelope_field(std::string_view key, ondemand::field& field, routing_request& request) {
  if (key == "model") {
    std::string_view model;
    if (auto error = field.value().get_string().get(model)) return bad_string(error, "model must be a string", "model");
    request.model = model;
  } else if (key == "stream") {
    bool stream = false;
    if (field.value().get_bool().get(stream)) return invalid("stream must be true or false", "stream");
    request.stream = stream;
  } else if (key == "user") {
    std::string_view user;
    if (auto error = field.value().get_string().get(user)) {
      if (request.endpoint == api_endpoint::other) return true;  // an engine's own route: its field to judge
      return bad_string(error, "user must be a string", "user");
    }
    request.user = user;
  } else {
    return false;
  }
  return true;
}

/// Chat and text completions name their model and carry their prompt (`has_prompt`).
std::expected<void, api_error> check_required(const routing_request& request, bool has_prompt) {
  const bool completion = request.endpoint == api_endpoint::chat_completions || request.endpoint == api_endpoint::completions;
  if (completion && request.model.empty()) return invalid("you must provide a model parameter", "model");
  if (request.endpoint == api_endpoint::chat_completions && !has_prompt) return invalid("messages is required", "messages");
  if (request.endpoint == api_endpoint::completions && !has_prompt) return invalid("prompt is required", "prompt");
  return {};
}

}  // namespace

int http_status(api_errc code) {
  switch (code) {
    case api_errc::invalid_json:
    case api_errc::invalid_request: return 400;
    case api_errc::invalid_api_key: return 401;
    case api_errc::not_found:
    case api_errc::unknown_model: return 404;
    case api_errc::method_not_allowed: return 405;
    case api_errc::body_too_large: return 413;
    case api_errc::too_many_requests:
    case api_errc::queue_full: return 429;
    case api_errc::queue_timeout: return 503;
    case api_errc::no_worker_available:
    case api_errc::overloaded: return 503;
    case api_errc::worker_failed: return 502;
    case api_errc::worker_timeout: return 504;
  }
  return 500;
}

std::string error_body(const api_error& error) {
  return nlohmann::json{{"error",
                         {{"message", error.message},
                          {"type", type_of(error.code)},
                          {"param", error.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(error.param)},
                          {"code", code_of(error.code)}}}}
      .dump();
}

struct request_parser::impl {
  ondemand::parser parser;
  ondemand::parser inner_parser;  ///< walks the `messages` array kept verbatim
  std::vector<json_member> members;  ///< parse_envelope's scan of the body
  std::string envelope;              ///< the members parse_envelope reads, as a small object
};

const std::size_t request_parser::padding = SIMDJSON_PADDING;
request_parser::request_parser() : impl_(std::make_unique<impl>()) {}
request_parser::~request_parser() = default;

std::expected<routing_request, api_error> request_parser::parse_envelope(api_endpoint endpoint, std::string_view body,
                                                                         std::size_t capacity) {
  routing_request request;
  request.endpoint = endpoint;
  if (capacity < body.size() + SIMDJSON_PADDING) return bad_json("internal: body buffer lacks padding");
  // The top-level members are found by a scan that steps over values (a prompt of thousands of
  // token ids in a few µs, where simdjson indexes every comma).
  if (auto scanned = scan_top_level_members(body, impl_->members); !scanned) return bad_json(scanned.error());
  auto has_prompt = read_scanned_envelope(endpoint, request);
  if (!has_prompt) return std::unexpected(has_prompt.error());
  if (auto missing = check_required(request, *has_prompt); !missing) return std::unexpected(missing.error());
  request.prompt_tokens = static_cast<std::uint32_t>(std::min<std::size_t>(body.size() / 4, UINT32_MAX));
  return request;
}

std::expected<bool, api_error> request_parser::read_scanned_envelope(api_endpoint endpoint, routing_request& request) {
  // The members read here are copied into a small object that simdjson then parses, so their
  // rules are the full parse's.
  std::string& envelope = impl_->envelope;
  envelope.assign("{");
  for (const json_member& member : impl_->members) {
    const std::string_view key = member.raw_key.substr(1, member.raw_key.size() - 2);
    const bool escaped = key.find('\\') != std::string_view::npos;  // simdjson decodes it: copy it whole
    std::string_view value = member.value;
    if (!escaped && key == "messages" && endpoint == api_endpoint::chat_completions) {
      if (value.front() == '[') value = "[]";  // an array: its insides are the worker's to judge
    } else if (!escaped && key == "prompt" && endpoint == api_endpoint::completions) {
      value = "0";  // any prompt will do: its length is estimated from the body
    } else if (!escaped && key != "model" && key != "stream" && key != "user") {
      continue;
    }
    if (envelope.size() > 1) envelope += ',';
    envelope.append(member.raw_key).append(":").append(value);
  }
  envelope += '}';
  envelope.reserve(envelope.size() + SIMDJSON_PADDING);
  ondemand::document document;
  if (auto error = impl_->parser.iterate(envelope.data(), envelope.size(), envelope.capacity()).get(document))
    return bad_json(error_message(error));
  ondemand::object object;
  if (document.get_object().get(object)) return bad_json("expected a JSON object");
  bool has_prompt = false;  // `messages` or `prompt`, as the endpoint needs
  for (auto field_result : object) {
    ondemand::field field;
    if (auto error = std::move(field_result).get(field)) return bad_json(error_message(error));
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return bad_json(error_message(error));
    if (auto read = read_envelope_field(key, field, request); !read) return std::unexpected(read.error());
    else if (*read) continue;
    if (key == "messages" && endpoint == api_endpoint::chat_completions) {
      ondemand::json_type type;  // its type from its first byte: nothing inside is read
      if (field.value().type().get(type) || type != ondemand::json_type::array) return invalid("messages must be an array", "messages");
      has_prompt = true;
    } else if (key == "prompt" && endpoint == api_endpoint::completions) {
      has_prompt = true;
    }
  }
  return has_prompt;
}

std::optional<std::expected<routing_request, api_error>> request_parser::parse_token_id_prompt(api_endpoint endpoint,
                                                                                               std::string_view body,
                                                                                               std::size_t capacity) {
  std::string_view prompt_key;
  if (endpoint == api_endpoint::completions) prompt_key = "prompt";
  else if (endpoint == api_endpoint::generate) prompt_key = "input_ids";
  else return std::nullopt;
  if (!scan_top_level_members(body, impl_->members)) return std::nullopt;
  const json_member* prompt = nullptr;
  for (const json_member& member : impl_->members) {
    const std::string_view key = member.raw_key.substr(1, member.raw_key.size() - 2);
    if (key.find('\\') != std::string_view::npos) return std::nullopt;  // it may decode to the prompt's name
    if (key == prompt_key) {
      if (prompt != nullptr) return std::nullopt;  // named twice: the full parse's rules
      prompt = &member;
    } else if (key == "text" && endpoint == api_endpoint::generate) {
      return std::nullopt;  // a text beside the ids: the full parse reads both
    }
  }
  if (prompt == nullptr) return std::nullopt;
  routing_request request;
  request.endpoint = endpoint;
  const auto readable_past = capacity - static_cast<std::size_t>(prompt->value.data() + prompt->value.size() - body.data());
  if (!read_token_id_array(prompt->value, request.prompt_token_ids, readable_past)) return std::nullopt;
  auto has_prompt = read_scanned_envelope(endpoint, request);
  if (!has_prompt) return std::unexpected(has_prompt.error());
  if (auto missing = check_required(request, true); !missing) return std::unexpected(missing.error());
  request.prompt_tokens = static_cast<std::uint32_t>(request.prompt_token_ids.size());
  return request;
}

std::expected<routing_request, api_error> request_parser::parse(api_endpoint endpoint, std::string_view body,
                                                                std::size_t capacity) {
  if (capacity < body.size() + SIMDJSON_PADDING) return bad_json("internal: body buffer lacks padding");
  if (auto read = parse_token_id_prompt(endpoint, body, capacity)) return std::move(*read);
  return parse_walking(endpoint, body, capacity);
}

std::expected<routing_request, api_error> request_parser::parse_walking(api_endpoint endpoint, std::string_view body,
                                                                        std::size_t capacity) {
  ondemand::parser& parser = impl_->parser;
  routing_request request;
  request.endpoint = endpoint;
  if (capacity < body.size() + SIMDJSON_PADDING) return bad_json("internal: body buffer lacks padding");
  // Before anything walks the body (simdjson skipping, chat templates over tools and messages):
  // nesting is bounded, and the object must be the whole body.
  if (auto shape = scan_json_shape(body); !shape) {
    if (shape.error() == json_shape_error::too_deep)
      return std::unexpected(api_error{api_errc::invalid_request, fmt::format("the body is refused: {}", describe(shape.error())), {}});
    return bad_json(describe(shape.error()));
  }
  ondemand::document document;
  if (auto error = parser.iterate(body.data(), body.size(), capacity).get(document)) return bad_json(error_message(error));
  ondemand::object object;
  if (document.get_object().get(object)) return bad_json("expected a JSON object");

  bool has_prompt = false;
  for (auto field_result : object) {
    ondemand::field field;
    if (auto error = std::move(field_result).get(field)) return bad_json(error_message(error));
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return bad_json(error_message(error));
    if (auto read = read_envelope_field(key, field, request); !read) return std::unexpected(read.error());
    else if (*read) continue;
    if (key == "messages" && endpoint == api_endpoint::chat_completions) {
      // Kept verbatim for chat templates, then walked for routing with a second parser.
      ondemand::array messages;
      std::string_view raw;
      if (field.value().get_array().get(messages) || messages.raw_json().get(raw))
        return invalid("messages must be an array", "messages");
      request.chat.messages_json = raw;
      const auto readable = capacity - static_cast<std::size_t>(raw.data() - body.data());
      ondemand::document messages_document;
      ondemand::value messages_value;
      if (impl_->inner_parser.iterate(raw.data(), raw.size(), readable).get(messages_document) ||
          messages_document.get_value().get(messages_value))
        return invalid("messages must be an array", "messages");
      if (auto read = read_messages(messages_value, request); !read) return std::unexpected(read.error());
    } else if (key == "tools" && endpoint == api_endpoint::chat_completions) {
      ondemand::array tools;
      std::string_view raw;
      if (field.value().get_array().get(tools) || tools.raw_json().get(raw))
        return invalid("tools must be an array", "tools");
      request.chat.tools_json = raw;
    } else if (key == "chat_template_kwargs" && endpoint == api_endpoint::chat_completions) {
      ondemand::object kwargs;
      std::string_view raw;
      if (field.value().get_object().get(kwargs) || kwargs.raw_json().get(raw))
        return invalid("chat_template_kwargs must be an object", "chat_template_kwargs");
      request.chat.template_kwargs_json = raw;
    } else if (key == "add_generation_prompt" && endpoint == api_endpoint::chat_completions) {
      if (field.value().get_bool().get(request.chat.add_generation_prompt))
        return invalid("add_generation_prompt must be true or false", "add_generation_prompt");
    } else if (key == "prompt" && endpoint == api_endpoint::completions) {
      has_prompt = true;
      if (auto read = read_prompt(field.value(), request, "prompt"); !read) return std::unexpected(read.error());
    } else if ((key == "text" || key == "input_ids") && endpoint == api_endpoint::generate) {
      if (auto read = read_prompt(field.value(), request, std::string(key)); !read) return std::unexpected(read.error());
    }
  }
  // Routes passed through may name no model (SGLang's /generate never does): the only set takes them.
  if (auto missing = check_required(request, endpoint == api_endpoint::chat_completions ? request.messages.count > 0 : has_prompt);
      !missing)
    return std::unexpected(missing.error());

  if (!request.prompt_token_ids.empty()) {
    request.prompt_tokens = static_cast<std::uint32_t>(request.prompt_token_ids.size());
  } else {
    std::size_t bytes = endpoint == api_endpoint::other ? body.size() : request.prompt_text.size();
    bytes += request.messages.text_bytes + 16 * request.messages.count;
    request.prompt_tokens = static_cast<std::uint32_t>(std::min<std::size_t>(bytes / 4, UINT32_MAX));
  }
  return request;
}

}  // namespace kvr
