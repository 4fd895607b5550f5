#pragma once
/// A model's chat template, as the engines apply it: the Jinja template of its
/// `tokenizer_config.json` (or a `.jinja` file), rendered with the request's `messages`,
/// `tools`, `add_generation_prompt` and `chat_template_kwargs`, plus the special tokens
/// (`bos_token`, `eos_token`, ...) HuggingFace passes. The rendered prompt is then tokenized
/// without adding special tokens, as vLLM does for chat requests.

#include <expected>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "core/prompt/jinja/template.hpp"

namespace kvr {

struct chat_render_inputs {
  std::string_view messages_json;          ///< the request's `messages` array
  std::string_view tools_json;             ///< its `tools` array, or empty
  std::string_view template_kwargs_json;   ///< its `chat_template_kwargs`, or empty
  bool add_generation_prompt = true;
};

/// Why a chat was not rendered.
struct chat_render_error {
  std::string message;
  /// Set when the client's input is refused before rendering (JSON inside a string field that
  /// nests deeper than a body may): the request's field at fault, for a 400 naming it. Empty for
  /// the template's own failures (`raise_exception`, type errors), which the engine would meet too.
  std::string refused_field;
};

class chat_template {
 public:
  /// From `tokenizer_config.json` text: `chat_template` (a string, or a list of named templates
  /// of which `default` is used) and the special tokens.
  [[nodiscard]] static std::expected<chat_template, std::string> from_tokenizer_config(std::string_view json_text);
  /// From raw Jinja source (a `.jinja` file), with no special tokens defined.
  [[nodiscard]] static std::expected<chat_template, std::string> from_source(std::string_view source);
  /// Reads `path`: a `.jinja` file as source, anything else as `tokenizer_config.json`.
  [[nodiscard]] static std::expected<chat_template, std::string> load(const std::string& path);

  /// Renders a request. Errors (malformed JSON, `raise_exception`, type errors) name the cause.
  [[nodiscard]] std::expected<std::string, chat_render_error> render(const chat_render_inputs& inputs) const;

  /// The documented fallback for a set configured with `chat_template_fallback: concat`:
  /// `<role>: <text>\n` per message, then `assistant: ` if a generation prompt is asked for.
  [[nodiscard]] static std::expected<std::string, chat_render_error> render_plain(const chat_render_inputs& inputs);

  /// Whether the template takes content parts (it loops over `message.content`), as vLLM
  /// detects it: then a list content stays a list ("openai" format: text parts as
  /// `{"type": "text", "text"}`, images as `{"type": "image"}`); otherwise text parts are joined
  /// with `\n` ("string" format).
  [[nodiscard]] bool wants_content_parts() const { return wants_content_parts_; }

 private:
  chat_template(jinja::compiled_template compiled, jinja::dict special_tokens)
      : compiled_(std::move(compiled)), special_tokens_(std::move(special_tokens)),
        wants_content_parts_(compiled_.loops_over("content")) {}
  jinja::compiled_template compiled_;
  jinja::dict special_tokens_;
  bool wants_content_parts_;
};

}  // namespace kvr
