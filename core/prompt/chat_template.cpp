#include "core/prompt/chat_template.hpp"

#include <fstream>
#include <sstream>

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

/// vLLM's preprocessing for templates that take string content: text parts joined with `\n`,
/// null content as "", and tool-call arguments given as JSON strings parsed into objects.
jinja::value normalize_messages(const ordered_json& messages, bool keep_content_parts) {
  jinja::list out;
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
      for (ordered_json& call : *calls) {
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
        ordered_json& function = call["function"];
        if (auto arguments = function.find("arguments"); arguments != function.end() && arguments->is_string()) {
          ordered_json parsed = ordered_json::parse(arguments->get<std::string>(), nullptr, false);
          if (!parsed.is_discarded()) *arguments = std::move(parsed);
        }
      }
    }
    out.push_back(jinja::value::from_json(normalized));
  }
  return jinja::value(std::move(out));
}

ordered_json parse_field(std::string_view text, const char* what) {
  ordered_json parsed = parse_ordered_json(text);
  if (parsed.is_discarded()) throw std::invalid_argument(std::string(what) + " is not valid JSON");
  return parsed;
}

}  // namespace

std::expected<chat_template, std::string> chat_template::from_source(std::string_view source) {
  auto compiled = jinja::compiled_template::parse(source);
  if (!compiled) return std::unexpected("chat template " + compiled.error());
  return chat_template(std::move(*compiled), {});
}

std::expected<chat_template, std::string> chat_template::from_tokenizer_config(std::string_view json_text) {
  const ordered_json config = ordered_json::parse(json_text, nullptr, false);
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

std::expected<std::string, std::string> chat_template::render(const chat_render_inputs& inputs) const {
  jinja::dict context = special_tokens_;
  try {
    const ordered_json messages = parse_field(inputs.messages_json, "messages");
    if (!messages.is_array()) return std::unexpected("messages must be an array");
    context.set("messages", normalize_messages(messages, wants_content_parts_));
    context.set("tools", inputs.tools_json.empty() ? jinja::value(jinja::none_t{})
                                                   : jinja::value::from_json(parse_field(inputs.tools_json, "tools")));
    context.set("add_generation_prompt", jinja::value(inputs.add_generation_prompt));
    if (!inputs.template_kwargs_json.empty()) {
      const ordered_json kwargs = parse_field(inputs.template_kwargs_json, "chat_template_kwargs");
      if (!kwargs.is_object()) return std::unexpected("chat_template_kwargs must be an object");
      for (const auto& [key, item] : kwargs.items()) context.set(key, jinja::value::from_json(item));
    }
  } catch (const std::exception& error) {
    return std::unexpected(error.what());
  }
  return compiled_.render(context);
}

std::expected<std::string, std::string> chat_template::render_plain(const chat_render_inputs& inputs) {
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
  } catch (const std::exception& error) {
    return std::unexpected(error.what());
  }
}

}  // namespace kvr
