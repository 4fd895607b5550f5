#pragma once
/// Where a set's tokenizer and chat template are, as vLLM's `--tokenizer` takes them: a
/// `tokenizer.json` file or a HuggingFace model directory (its `tokenizer.json`, and its chat
/// template from `chat_template.jinja` or `tokenizer_config.json`).

#include <expected>
#include <string>

namespace kvr {

struct model_files {
  std::string tokenizer;      ///< a tokenizer.json; empty = none
  std::string chat_template;  ///< a tokenizer_config.json or a .jinja file; empty = none
};

/// `tokenizer`: a file, a model directory, or empty. `tokenizer_config`: a file, a model
/// directory, or empty (then the tokenizer's directory supplies the template, if it has one).
/// An error says which directory lacks which file.
[[nodiscard]] std::expected<model_files, std::string> resolve_model_files(const std::string& tokenizer,
                                                                          const std::string& tokenizer_config);

}  // namespace kvr
