#pragma once
/// A parsed Jinja chat template, rendered the way HuggingFace (and so vLLM and SGLang) render
/// it with Jinja2: `trim_blocks`, `lstrip_blocks`, Python value semantics, `tojson` as
/// `json.dumps(ensure_ascii=False)`. Constructs outside the supported subset are refused at
/// parse time with their name and line; see docs/chat-templates.md for the subset.

#include <expected>
#include <memory>
#include <string>
#include <string_view>

#include "core/prompt/jinja/value.hpp"

namespace kvr::jinja {

struct node;

class compiled_template {
 public:
  [[nodiscard]] static std::expected<compiled_template, std::string> parse(std::string_view source);

  /// Renders with `context` as the global variables. Thread-safe (the template is read-only).
  [[nodiscard]] std::expected<std::string, std::string> render(const dict& context) const;

  /// Whether some `for` loop iterates over an attribute or key named `name` (`for part in
  /// message.content`, `message['content']`): how vLLM tells templates that want OpenAI
  /// content parts from templates that want strings.
  [[nodiscard]] bool loops_over(std::string_view name) const;

 private:
  struct program;
  explicit compiled_template(std::shared_ptr<const program> p) : program_(std::move(p)) {}
  std::shared_ptr<const program> program_;
};

}  // namespace kvr::jinja
