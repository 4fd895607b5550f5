#include "core/prompt/model_files.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace kvr {
namespace {

namespace fs = std::filesystem;

/// A fresh directory under the test's temporary directory, with `files` in it.
fs::path model_dir(const std::string& name, std::initializer_list<const char*> files) {
  const fs::path dir = fs::temp_directory_path() / ("kvr-model-files-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* file : files) std::ofstream(dir / file) << "{}";
  return dir;
}

TEST(model_files, a_model_directory_gives_its_tokenizer_and_its_chat_template) {
  const fs::path dir = model_dir("both", {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"});
  const auto files = resolve_model_files(dir.string(), "");
  ASSERT_TRUE(files) << files.error();
  EXPECT_EQ(files->tokenizer, (dir / "tokenizer.json").string());
  EXPECT_EQ(files->chat_template, (dir / "chat_template.jinja").string()) << "the separate template file wins";
  fs::remove(dir / "chat_template.jinja");
  EXPECT_EQ(resolve_model_files(dir.string(), "")->chat_template, (dir / "tokenizer_config.json").string());
  fs::remove(dir / "tokenizer_config.json");
  EXPECT_EQ(resolve_model_files(dir.string(), "")->chat_template, "") << "no template: chats route on load";
  fs::remove_all(dir);
}

TEST(model_files, files_pass_through_and_an_explicit_template_wins_over_the_directory) {
  const fs::path dir = model_dir("explicit", {"tokenizer.json", "tokenizer_config.json"});
  const auto files = resolve_model_files(dir.string(), "/somewhere/template.jinja");
  ASSERT_TRUE(files);
  EXPECT_EQ(files->chat_template, "/somewhere/template.jinja");
  const auto plain = resolve_model_files("/x/tokenizer.json", "/x/tokenizer_config.json");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->tokenizer, "/x/tokenizer.json");
  EXPECT_EQ(plain->chat_template, "/x/tokenizer_config.json");
  EXPECT_EQ(resolve_model_files("", "")->tokenizer, "");
  fs::remove_all(dir);
}

TEST(model_files, a_directory_without_the_files_is_an_error_naming_it) {
  const fs::path dir = model_dir("empty", {});
  const auto files = resolve_model_files(dir.string(), "");
  ASSERT_FALSE(files);
  EXPECT_EQ(files.error(), "the model directory " + dir.string() + " has no tokenizer.json");
  const auto no_template = resolve_model_files("", dir.string());
  ASSERT_FALSE(no_template);
  EXPECT_NE(no_template.error().find("has neither chat_template.jinja nor tokenizer_config.json"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvr
