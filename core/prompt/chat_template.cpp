#include "core/prompt/chat_template.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/common/json_parse.hpp"
#include "core/prompt/jinja/json_value.hpp"

namespace kvr {

namespace {

using ordered_json = nlohmann::ordered_json;

/// The special tokens HuggingFace passes to templates (`special_tokens_map`): plain strings or
/// AddedToken objects with a `content`; absent or null ones are not defined.
jinja::dict special_tokens_of(const ordered_json& config) {
  jinja::dict tokens;
  for (const char* name : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    const auto it = config.find(name);
    if (it == config.end()) continue;
    if (it->is_string()) tokens.set(name, jinja::value(it->get<std::string>()));
    else if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
      tokens.set(name, jinja::value((*it)["content"].get<std::string>()));
  }
  return tokens;
}

/// Client input refused before it is rendered, naming the request's field at fault.
struct refused_input : std::invalid_argument {
  refused_input(std::string field_name, const std::string& what) : std::invalid_argument(what), field(std::move(field_name)) {}
  std::string field;
};

/// Whether the client's text is refused (rather than merely malformed) by `error`.
bool refuses_input(json_parse_error error) {
  return error == json_parse_error::too_deep || error == json_parse_error::too_large;
}

/// `text` read as template values, or a refusal naming `field` if it nests deeper than any
/// body may or its values would spend what is left of the request's `budget`.
jinja::value parse_field(std::string_view text, const std::string& field, jinja::value_budget& budget) {
  auto parsed = jinja::value_from_json_text(text, max_json_depth, &budget);
  if (!parsed && refuses_input(parsed.error()))
    throw refused_input(field, field + " " + describe(parsed.error()));
  if (!parsed) throw std::invalid_argument(field + " " + describe(parsed.error()));
  return std::move(*parsed);
}

/// A tool call's `arguments` string parsed into an object, as vLLM does before rendering; a
/// string that is not JSON stays a string, one nesting deeper than a body may or holding more
/// than the budget is refused. The field is named
/// (`messages[i].tool_calls[j].function.arguments`) only when refused.
void parse_arguments(jinja::value& arguments, std::size_t message, std::size_t call, jinja::value_budget& budget) {
  auto parsed = jinja::value_from_json_text(arguments.as_string(), max_json_depth, &budget);
  if (parsed) {
    arguments = std::move(*parsed);
  } else if (refuses_input(parsed.error())) {
    std::string field = fmt::format("messages[{}].tool_calls[{}].function.arguments", message, call);
    std::string what = field + " " + describe(parsed.error());
    throw refused_input(std::move(field), what);
  }
}

/// A content part's `type`: "" when it has none; one that is not a string is refused, as the
/// engines' preprocessing refuses it.
std::string_view part_type(const jinja::dict& part) {
  const jinja::value* type = part.find("type");
  if (type == nullptr) return {};
  if (!type->is_string()) throw std::invalid_argument("a content part's type must be a string");
  return type->as_string();
}

/// Content given as parts, for a template that takes parts: text parts as they are, images as
/// `{"type": "image"}`, anything else dropped.
jinja::value content_parts_for_template(const jinja::list& parts) {
  jinja::list out;
  for (const jinja::value& part : parts) {
    if (!part.is_dict()) continue;
    const std::string_view type = part_type(part.as_dict());
    const jinja::value* text = part.as_dict().find("text");
    if (type == "text" && text != nullptr) {
      jinja::dict kept;
      kept.set("type", jinja::value("text"));
      kept.set("text", *text);
      out.emplace_back(std::move(kept));
    } else if (type == "image_url" || type == "image") {
      jinja::dict image;
      image.set("type", jinja::value("image"));
      out.emplace_back(std::move(image));
    }
  }
  return jinja::value(std::move(out));
}

/// Content given as parts, for a template that takes a string: the text parts joined by `\n`.
jinja::value content_parts_joined(const jinja::list& parts) {
  std::string text;
  bool first = true;
  for (const jinja::value& part : parts) {
    if (!part.is_dict() || part_type(part.as_dict()) != "text") continue;
    const jinja::value* part_text = part.as_dict().find("text");
    if (part_text == nullptr) continue;
    if (!part_text->is_string()) throw std::invalid_argument("a text content part's text must be a string");
    if (!first) text += '\n';
    first = false;
    text += part_text->as_string();
  }
  return jinja::value(std::move(text));
}

/// vLLM's preprocessing for templates, in place: null or absent content as "", content parts
/// joined with `\n` (or kept, for templates that take parts), and tool-call arguments given as
/// JSON strings parsed into objects (charged to `budget`).
void normalize_messages(jinja::value& messages, bool keep_content_parts, jinja::value_budget& budget) {
  std::size_t index = 0;
  for (jinja::value& message : messages.as_list()) {
    if (!message.is_dict()) throw std::invalid_argument("each message must be an object");
    jinja::dict& fields = message.as_dict();
    const jinja::value* content = fields.find("content");
    if (content == nullptr || content->is_none()) fields.set("content", jinja::value(""));
    else if (content->is_list() && keep_content_parts) fields.set("content", content_parts_for_template(content->as_list()));
    else if (content->is_list()) fields.set("content", content_parts_joined(content->as_list()));
    if (const jinja::value* calls = fields.find("tool_calls"); calls != nullptr && calls->is_list()) {
      std::size_t call_index = 0;
      for (jinja::value& call : calls->as_list()) {
        const std::size_t this_call = call_index++;
        if (!call.is_dict()) continue;
        const jinja::value* function = call.as_dict().find("function");
        if (function == nullptr || !function->is_dict()) continue;
        for (auto& [key, arguments] : function->as_dict().items)
          if (key == "arguments" && arguments.is_string()) parse_arguments(arguments, index, this_call, budget);
      }
    }
    ++index;
  }
}

}  // namespace

std::expected<chat_template, std::string> chat_template::from_source(std::string_view source) {
  auto compiled = jinja::compiled_template::parse(source);
  if (!compiled) return std::unexpected("chat template " + compiled.error());
  return chat_template(std::move(*compiled), {});
}

std::expected<chat_template, std::string> chat_template::from_tokenizer_config(std::string_view json_text) {
  const ordered_json config = parse_ordered_json(json_text);
  if (config.is_discarded() || !config.is_object()) return std::unexpected("tokenizer_config.json is not a JSON object");
  const auto field = config.find("chat_template");
  if (field == config.end() || field->is_null()) return std::unexpected("tokenizer_config.json has no chat_template");
  std::string source;
  if (field->is_string()) {
    source = field->get<std::string>();
  } else if (field->is_array()) {
    for (const ordered_json& named : *field)
      if (named.is_object() && named.value("name", "") == "default" && named.contains("template"))
        source = named["template"].get<std::string>();
    if (source.empty()) return std::unexpected("tokenizer_config.json: chat_template list has no 'default' entry");
  } else {
    return std::unexpected("tokenizer_config.json: chat_template must be a string or a list of named templates");
  }
  auto compiled = jinja::compiled_template::parse(source);
  if (!compiled) return std::unexpected("chat template " + compiled.error());
  return chat_template(std::move(*compiled), special_tokens_of(config));
}

std::expected<chat_template, std::string> chat_template::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::unexpected("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  auto loaded = path.ends_with(".jinja") ? from_source(text.str()) : from_tokenizer_config(text.str());
  if (!loaded) return std::unexpected(path + ": " + loaded.error());
  return loaded;
}

std::expected<std::string, chat_render_error> chat_template::render(const chat_render_inputs& inputs) const {
  jinja::dict context = special_tokens_;
  jinja::value_budget budget = jinja::value_budget::for_text_of(
      inputs.messages_json.size() + inputs.tools_json.size() + inputs.template_kwargs_json.size());
  try {
    jinja::value messages = parse_field(inputs.messages_json, "messages", budget);
    if (!messages.is_list()) return std::unexpected(chat_render_error{"messages must be an array", {}});
    normalize_messages(messages, wants_content_parts_, budget);
    context.set("messages", std::move(messages));
    context.set("tools", inputs.tools_json.empty() ? jinja::value(jinja::none_t{}) : parse_field(inputs.tools_json, "tools", budget));
    context.set("add_generation_prompt", jinja::value(inputs.add_generation_prompt));
    if (!inputs.template_kwargs_json.empty()) {
      const jinja::value kwargs = parse_field(inputs.template_kwargs_json, "chat_template_kwargs", budget);
      if (!kwargs.is_dict()) return std::unexpected(chat_render_error{"chat_template_kwargs must be an object", {}});
      // The kwargs' keys are distinct already; only the few the context holds before them
      // (special tokens, messages, tools) are looked for, so many kwargs cost linear time.
      const std::size_t named_before = context.items.size();
      for (auto& [key, item] : kwargs.as_dict().items) {
        const auto end = context.items.begin() + static_cast<std::ptrdiff_t>(named_before);
        const auto same = std::find_if(context.items.begin(), end, [&](const auto& named) { return named.first == key; });
        if (same != end) same->second = std::move(item);
        else context.items.emplace_back(key, std::move(item));
      }
    }
  } catch (const refused_input& refused) {
    return std::unexpected(chat_render_error{refused.what(), refused.field});
  } catch (const std::exception& error) {
    return std::unexpected(chat_render_error{error.what(), {}});
  }
  auto rendered = compiled_.render(context);
  if (!rendered) return std::unexpected(chat_render_error{std::move(rendered.error()), {}});
  return std::move(*rendered);
}

std::expected<std::string, chat_render_error> chat_template::render_plain(const chat_render_inputs& inputs) {
  jinja::value_budget budget = jinja::value_budget::for_text_of(inputs.messages_json.size());
  try {
    jinja::value normalized = parse_field(inputs.messages_json, "messages", budget);
    if (!normalized.is_list()) normalized = jinja::value(jinja::list{});
    normalize_messages(normalized, false, budget);
    std::string out;
    for (const jinja::value& message : normalized.as_list()) {
      const jinja::value* role = message.as_dict().find("role");
      const jinja::value* content = message.as_dict().find("content");
      out += (role != nullptr ? role->str() : std::string()) + ": " + (content != nullptr ? content->str() : std::string()) + "\n";
    }
    if (inputs.add_generation_prompt) out += "assistant: ";
    return out;
  } catch (const refused_input& refused) {
    return std::unexpected(chat_render_error{refused.what(), refused.field});
  } catch (const std::exception& error) {
    return std::unexpected(chat_render_error{error.what(), {}});
  }
}

}  // namespace kvr
