#include "core/prompt/model_files.hpp"

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

namespace kvr {
namespace {

namespace fs = std::filesystem;

bool is_directory(const std::string& path) {
  std::error_code ec;
  return !path.empty() && fs::is_directory(path, ec);
}

bool is_file(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

/// A model directory's chat template: the separate `chat_template.jinja` newer models ship, else
/// the one inside `tokenizer_config.json`; empty when it has neither.
std::string template_in(const fs::path& directory) {
  if (is_file(directory / "chat_template.jinja")) return (directory / "chat_template.jinja").string();
  if (is_file(directory / "tokenizer_config.json")) return (directory / "tokenizer_config.json").string();
  return {};
}

}  // namespace

std::expected<model_files, std::string> resolve_model_files(const std::string& tokenizer, const std::string& tokenizer_config) {
  model_files files{tokenizer, tokenizer_config};
  if (is_directory(tokenizer)) {
    const fs::path json = fs::path(tokenizer) / "tokenizer.json";
    if (!is_file(json)) return std::unexpected(fmt::format("the model directory {} has no tokenizer.json", tokenizer));
    files.tokenizer = json.string();
    if (tokenizer_config.empty()) files.chat_template = template_in(tokenizer);
  }
  if (is_directory(tokenizer_config)) {
    files.chat_template = template_in(tokenizer_config);
    if (files.chat_template.empty())
      return std::unexpected(
          fmt::format("the model directory {} has neither chat_template.jinja nor tokenizer_config.json", tokenizer_config));
  }
  return files;
}

}  // namespace kvr
