/// `kvrouter render-chat --tokenizer-config PATH [--tokenize --tokenizer PATH]`: reads an
/// OpenAI `messages` array (or a whole chat request body) on stdin and prints the prompt the
/// set's chat template renders from it, byte for byte, or with `--tokenize` its token ids, which
/// is what the router hashes. Operators use it to see why a request did or did not hit a cache.

#include <iostream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "core/common/json_parse.hpp"
#include "core/prompt/chat_template.hpp"
#include "core/prompt/tokenizer.hpp"

namespace kvr::cli {

namespace {

constexpr const char* usage =
    "Usage: kvrouter render-chat --tokenizer-config PATH [--tokenize --tokenizer PATH] [--no-generation-prompt] < messages.json\n"
    "Renders an OpenAI `messages` array, or a whole chat request body ({\"messages\", \"tools\",\n"
    "\"chat_template_kwargs\", \"add_generation_prompt\"}), read on stdin, with the chat template of\n"
    "PATH (a tokenizer_config.json, or a .jinja file), exactly as the router does before hashing.\n"
    "Prints the prompt as-is; with --tokenize, its token ids as one JSON array.\n";

int fail(const std::string& message) {
  std::cerr << "kvrouter render-chat: " << message << "\n";
  return 2;
}

struct render_chat_options {
  std::string config_path;
  std::string tokenizer_path;
  bool tokenize = false;
  bool generation_prompt = true;
};

const option_table<render_chat_options>& render_chat_table() {
  using o_t = render_chat_options;
  static const option_table<o_t> t = {
      text<o_t>("--tokenizer-config", "PATH", "tokenizer_config.json (its chat_template) or a .jinja file",
                [](auto& o) -> auto& { return o.config_path; }, true),
      text<o_t>("--tokenizer", "PATH", "with --tokenize: the tokenizer.json", [](auto& o) -> auto& { return o.tokenizer_path; }, true),
      flag_switch<o_t>("--tokenize", "print the rendered prompt's token ids too", [](auto& o) -> auto& { return o.tokenize; }),
      flag_switch<o_t>("--no-generation-prompt", "render without the assistant's generation prompt",
                       [](auto& o) -> auto& { return o.generation_prompt; }, false),
  };
  return t;
}

}  // namespace

int run_render_chat(const std::vector<std::string>& args) {
  render_chat_options parsed;
  if (auto ok = parse_options<render_chat_options>(render_chat_table(), args, parsed); !ok) {
    if (!ok.error().empty()) return fail(ok.error());
    std::cout << usage << "\nOptions:\n" << options_help<render_chat_options>(render_chat_table());
    return 0;
  }
  const auto& [config_path, tokenizer_path, tokenize, generation_prompt] = parsed;
  if (config_path.empty()) return fail("--tokenizer-config PATH is required");
  if (tokenize && tokenizer_path.empty()) return fail("--tokenize needs --tokenizer PATH");
  auto chat = chat_template::load(config_path);
  if (!chat) return fail(chat.error());

  const std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  const nlohmann::ordered_json request = parse_ordered_json(input);
  if (request.is_discarded()) return fail("stdin is not valid JSON");
  std::string messages;
  std::string tools;
  std::string kwargs;
  chat_render_inputs inputs;
  inputs.add_generation_prompt = generation_prompt;
  if (request.is_array()) {
    messages = request.dump();
  } else if (request.is_object() && request.contains("messages")) {
    messages = request["messages"].dump();
    if (request.contains("tools")) tools = request["tools"].dump();
    if (request.contains("chat_template_kwargs")) kwargs = request["chat_template_kwargs"].dump();
    if (request.contains("add_generation_prompt")) inputs.add_generation_prompt = request["add_generation_prompt"].get<bool>();
  } else {
    return fail("stdin must be a messages array or a request object with messages");
  }
  inputs.messages_json = messages;
  inputs.tools_json = tools;
  inputs.template_kwargs_json = kwargs;
  auto rendered = chat->render(inputs);
  if (!rendered) return fail(rendered.error().message);
  if (!tokenize) {
    std::cout << *rendered;
    return 0;
  }
  auto loaded = tokenizer::load(tokenizer_path);
  if (!loaded) return fail(loaded.error().message);
  std::vector<std::uint32_t> ids;
  loaded->encode(*rendered, ids);
  std::cout << nlohmann::json(ids).dump() << "\n";
  return 0;
}

}  // namespace kvr::cli
