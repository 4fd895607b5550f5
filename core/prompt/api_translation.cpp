#include "core/prompt/api_translation.hpp"

#include <algorithm>

#include <simdjson.h>

#include "core/common/json_shape.hpp"

namespace kvr {
namespace {

using namespace simdjson;

/// The chat body being written: strings are copied as the client wrote them (quotes and
/// escapes included), so nothing is decoded or re-encoded and nothing per message is kept. The
/// chat parser that reads the result validates every string it copied.
class chat_writer {
 public:
  explicit chat_writer(std::size_t body_size) { out_.reserve(body_size + 64); }

  void begin_message(std::string_view role) {
    out_ += messages_ ? ",{\"role\":\"" : "{\"role\":\"";
    out_ += role;
    out_ += "\",\"content\":";
    ++messages_;
  }
  void end_message() { out_ += '}'; }
  std::string& out() { return out_; }
  /// True until a message other than the system one is written.
  [[nodiscard]] bool empty() const { return messages_ == 0; }
  /// The system message's content, a JSON string: it renders first wherever the body has it.
  std::string& system() { return system_; }

  /// `{"messages": [...]` so far, closed with the envelope's members that were strings
  /// (`model`, `user`) or a boolean (`stream`), as written.
  std::string finish(std::string_view model, std::string_view stream, std::string_view user) {
    if (!system_.empty()) out_.insert(prefix.size(), "{\"role\":\"system\",\"content\":" + system_ + (messages_ ? "}," : "}"));
    out_ += ']';
    for (const auto& [key, raw] : {std::pair{",\"model\":", model}, {",\"stream\":", stream}, {",\"user\":", user}})
      if (!raw.empty()) out_.append(key).append(raw);
    out_ += '}';
    return std::move(out_);
  }

 private:
  static constexpr std::string_view prefix = "{\"messages\":[";
  std::string out_{prefix};
  std::string system_;
  std::size_t messages_ = 0;
};

/// A string value's JSON token as written (quotes and escapes included); empty if not a string.
std::string_view raw_string(ondemand::value value) {
  ondemand::json_type type;
  if (value.type().get(type) || type != ondemand::json_type::string) return {};
  std::string_view raw = value.raw_json_token();
  while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\r' || raw.back() == '\t'))
    raw.remove_suffix(1);
  return raw.size() >= 2 && raw.front() == '"' && raw.back() == '"' ? raw : std::string_view();
}

bool is_null(ondemand::value value) {
  bool null = false;
  return !value.is_null().get(null) && null;
}

/// A value as its JSON token if it is a boolean, else empty.
std::string_view raw_boolean(ondemand::value value) {
  bool flag = false;
  if (value.get_bool().get(flag)) return {};
  return flag ? "true" : "false";
}

/// Calls `read(key, value)` for each member of `object` in order; false as soon as a member
/// cannot be read or `read` refuses it.
template <class Read>
bool each_member(ondemand::object& object, Read read) {
  for (auto field_result : object) {
    ondemand::field field;
    std::string_view key;
    if (std::move(field_result).get(field) || field.unescaped_key().get(key)) return false;
    if (!read(key, field.value())) return false;
  }
  return true;
}

/// Writes a message's content as one JSON string: a string as written, or text parts of the
/// given types joined with newlines (how vLLM hands them to a string-format chat template).
/// False for anything else.
bool write_text(ondemand::value content, std::initializer_list<std::string_view> text_types, std::string& out) {
  if (const std::string_view raw = raw_string(content); !raw.empty()) {
    out += raw;
    return true;
  }
  ondemand::array parts;
  if (content.get_array().get(parts)) return false;
  bool first = true;
  for (auto part_result : parts) {
    ondemand::object part;
    if (part_result.get_object().get(part)) return false;
    std::string_view type, text;
    const bool read = each_member(part, [&](std::string_view key, ondemand::value value) {
      if (key == "type") return !value.get_string().get(type);
      if (key == "text") return !(text = raw_string(value)).empty();
      return true;
    });
    if (!read) return false;
    if (text.empty() || std::find(text_types.begin(), text_types.end(), type) == text_types.end()) return false;
    out += first ? "\"" : "\\n";
    out += text.substr(1, text.size() - 2);
    first = false;
  }
  if (first) return false;  // no part: not text
  out += '"';
  return true;
}

/// Runs `read` over `body`'s top-level object, parsed on demand (nesting bounded first, as for
/// every body); nullopt when the body is not such an object or `read` refuses it.
template <class Read>
std::optional<std::string> translate(std::string_view body, std::size_t capacity, Read read) {
  if (!scan_json_shape(body)) return std::nullopt;
  padded_string copy;
  padded_string_view padded(body.data(), body.size(), capacity);
  if (capacity < body.size() + SIMDJSON_PADDING) {
    copy = padded_string(body);
    padded = copy;
  }
  ondemand::parser parser;
  ondemand::document document;
  ondemand::object object;
  if (parser.iterate(padded).get(document) || document.get_object().get(object)) return std::nullopt;
  chat_writer chat(body.size());
  std::string_view model, stream, user;
  const bool whole = each_member(object, [&](std::string_view key, ondemand::value value) {
    if (key == "model") model = raw_string(value);
    else if (key == "stream") stream = raw_boolean(value);
    else if (key == "user") user = raw_string(value);
    else return read(key, value, chat);
    return true;
  });
  if (!whole || chat.empty()) return std::nullopt;
  return chat.finish(model, stream, user);
}

}  // namespace

std::optional<std::string> responses_as_chat(std::string_view body, std::size_t capacity) {
  bool has_input = false;
  auto chat = translate(body, capacity, [&](std::string_view key, ondemand::value value, chat_writer& out) {
    if (key == "tools" || key == "previous_response_id" || (key == "input" && has_input)) return false;
    if (key == "instructions") {
      if (is_null(value)) return true;
      out.system() = raw_string(value);
      return !out.system().empty();
    }
    if (key != "input") return true;
    has_input = true;
    if (const std::string_view raw = raw_string(value); !raw.empty()) {
      out.begin_message("user");
      out.out() += raw;
      out.end_message();
      return true;
    }
    ondemand::array items;
    if (value.get_array().get(items)) return false;
    for (auto item_result : items) {
      ondemand::object item;
      if (item_result.get_object().get(item)) return false;
      std::string_view type = "message", role;
      std::string content;  // the item's text, as a JSON string (an item is small; the chat is not)
      const bool read = each_member(item, [&](std::string_view name, ondemand::value member) {
        if (name == "type") return !member.get_string().get(type);
        if (name == "role") return !member.get_string().get(role);
        if (name == "content") return content.clear(), write_text(member, {"input_text", "output_text", "text"}, content);
        return true;
      });
      if (!read || type != "message" || content.empty()) return false;
      if (role != "user" && role != "assistant" && role != "system" && role != "developer") return false;
      out.begin_message(role == "developer" ? "system" : role);
      out.out() += content;
      out.end_message();
    }
    return !out.empty();
  });
  if (!chat || !has_input) return std::nullopt;
  return chat;
}

std::optional<std::string> messages_as_chat(std::string_view body, std::size_t capacity) {
  bool has_messages = false;
  return translate(body, capacity, [&](std::string_view key, ondemand::value value, chat_writer& out) {
    if (key == "tools") return false;
    if (key == "system") {
      out.system().clear();
      return is_null(value) || write_text(value, {"text"}, out.system());
    }
    if (key != "messages" || has_messages) return key != "messages";
    has_messages = true;
    ondemand::array turns;
    if (value.get_array().get(turns)) return false;
    for (auto turn_result : turns) {
      ondemand::object turn;
      if (turn_result.get_object().get(turn)) return false;
      std::string_view role;
      std::string content;
      const bool read = each_member(turn, [&](std::string_view name, ondemand::value member) {
        if (name == "role") return !member.get_string().get(role);
        if (name == "content") return content.clear(), write_text(member, {"text"}, content);
        return true;
      });
      if (!read || (role != "user" && role != "assistant") || content.empty()) return false;
      out.begin_message(role);
      out.out() += content;
      out.end_message();
    }
    return true;
  });
}

}  // namespace kvr
