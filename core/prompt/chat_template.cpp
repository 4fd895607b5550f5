#include "core/prompt/chat_template.hpp"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/common/json_parse.hpp"

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

/// `text` parsed, or a refusal naming `field` if it nests deeper than any body may.
ordered_json parse_field(std::string_view text, const std::string& field) {
  auto parsed = parse_json<ordered_json>(text);
  if (!parsed && parsed.error() == json_parse_error::too_deep)
    throw refused_input(field, field + " " + describe(parsed.error()));
  if (!parsed) throw std::invalid_argument(field + " " + describe(parsed.error()));
  return std::move(*parsed);
}

/// A tool call's `arguments` string parsed into an object, as vLLM does before rendering; a
/// string that is not JSON stays a string, one nesting deeper than a body may is refused.
/// The field is named (`messages[i].tool_calls[j].function.arguments`) only when refused.
void parse_arguments(ordered_json& arguments, std::size_t message, std::size_t call) {
  auto parsed = parse_json<ordered_json>(arguments.get_ref<const std::string&>());
  if (parsed) {
    arguments = std::move(*parsed);
  } else if (parsed.error() == json_parse_error::too_deep) {
    std::string field = fmt::format("messages[{}].tool_calls[{}].function.arguments", message, call);
    std::string what = field + " " + describe(parsed.error());
    throw refused_input(std::move(field), what);
  }
}

/// vLLM's preprocessing for templates that take string content: text parts joined with `\n`,
/// null content as "", and tool-call arguments given as JSON strings parsed into objects.
jinja::value normalize_messages(const ordered_json& messages, bool keep_content_parts) {
  jinja::list out;
  out.reserve(messages.size());
  std::size_t index = 0;
  for (const ordered_json& message : messages) {
    if (!message.is_object()) throw std::invalid_argument("each message must be an object");
    ordered_json normalized = message;
    const auto content = message.find("content");
    if (content == message.end() || content->is_null()) {
      normalized["content"] = "";
    } else if (content->is_array() && keep_content_parts) {
      ordered_json parts = ordered_json::array();
      for (const ordered_json& part : *content) {
        if (!part.is_object()) continue;
        const std::string type = part.value("type", "");
        if (type == "text" && part.contains("text")) parts.push_back({{"type", "text"}, {"text", part["text"]}});
        else if (type == "image_url" || type == "image") parts.push_back({{"type", "image"}});
      }
      normalized["content"] = std::move(parts);
    } else if (content->is_array()) {
      std::string text;
      bool first = true;
      for (const ordered_json& part : *content) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text")) continue;
        if (!first) text += '\n';
        first = false;
        text += part["text"].get<std::string>();
      }
      normalized["content"] = text;
    }
    if (auto calls = normalized.find("tool_calls"); calls != normalized.end() && calls->is_array()) {
      std::size_t call_index = 0;
      for (ordered_json& call : *calls) {
        const std::size_t this_call = call_index++;
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
        ordered_json& function = call["function"];
        if (auto arguments = function.find("arguments"); arguments != function.end() && arguments->is_string())
          parse_arguments(*arguments, index, this_call);
      }
    }
    out.push_back(jinja::value::from_json(normalized));
    ++index;
  }
  return jinja::value(std::move(out));
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
  try {
    const ordered_json messages = parse_field(inputs.messages_json, "messages");
    if (!messages.is_array()) return std::unexpected(chat_render_error{"messages must be an array", {}});
    context.set("messages", normalize_messages(messages, wants_content_parts_));
    context.set("tools", inputs.tools_json.empty() ? jinja::value(jinja::none_t{})
                                                   : jinja::value::from_json(parse_field(inputs.tools_json, "tools")));
    context.set("add_generation_prompt", jinja::value(inputs.add_generation_prompt));
    if (!inputs.template_kwargs_json.empty()) {
      const ordered_json kwargs = parse_field(inputs.template_kwargs_json, "chat_template_kwargs");
      if (!kwargs.is_object()) return std::unexpected(chat_render_error{"chat_template_kwargs must be an object", {}});
      for (const auto& [key, item] : kwargs.items()) context.set(key, jinja::value::from_json(item));
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
  try {
    const ordered_json messages = parse_field(inputs.messages_json, "messages");
    const jinja::value normalized = normalize_messages(messages.is_array() ? messages : ordered_json::array(), false);
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
