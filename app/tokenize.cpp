/// `kvrouter tokenize --tokenizer PATH`: reads UTF-8 text on stdin, prints its token ids as one
/// JSON array (no special tokens added), exactly as the router tokenizes prompts. Operators use
/// it to see why a request did or did not hit an engine's cache.

#include <iostream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "core/common/json_parse.hpp"
#include "core/prompt/tokenizer.hpp"

namespace kvr::cli {

namespace {

struct tokenize_options {
  std::string tokenizer;
  bool json_lines = false;
};

const option_table<tokenize_options>& tokenize_table() {
  static const option_table<tokenize_options> t = {
      text<tokenize_options>("--tokenizer", "PATH", "the HuggingFace tokenizer.json (or its model directory)",
                             [](auto& o) -> auto& { return o.tokenizer; }, true),
      flag_switch<tokenize_options>("--json-lines", "each stdin line is a JSON string, and each gets its own line of ids",
                                    [](auto& o) -> auto& { return o.json_lines; }),
  };
  return t;
}

}  // namespace

int run_tokenize(const std::vector<std::string>& args) {
  tokenize_options parsed;
  if (auto ok = parse_options<tokenize_options>(tokenize_table(), args, parsed); !ok) {
    if (ok.error().empty()) {
      std::cout << "Usage: kvrouter tokenize --tokenizer PATH/tokenizer.json [--json-lines] < text.txt\n"
                   "Prints the token ids of the UTF-8 text on stdin as one JSON array (no special tokens added).\n\n"
                << options_help<tokenize_options>(tokenize_table());
      return 0;
    }
    std::cerr << "kvrouter tokenize: " << ok.error() << "\n";
    return 2;
  }
  const std::string& path = parsed.tokenizer;
  const bool json_lines = parsed.json_lines;
  if (path.empty()) {
    std::cerr << "kvrouter tokenize: --tokenizer PATH is required\n";
    return 2;
  }
  auto loaded = tokenizer::load(path);
  if (!loaded) {
    std::cerr << "kvrouter tokenize: " << loaded.error().message << "\n";
    return 2;
  }
  std::vector<std::uint32_t> ids;
  if (json_lines) {
    std::string line;
    for (std::size_t number = 1; std::getline(std::cin, line); ++number) {
      const nlohmann::json text = parse_plain_json(line);
      if (!text.is_string()) {
        std::cerr << "kvrouter tokenize: line " << number << " is not a JSON string\n";
        return 2;
      }
      ids.clear();
      loaded->encode(text.get_ref<const std::string&>(), ids);
      std::cout << nlohmann::json(ids).dump() << "\n";
    }
    return 0;
  }
  const std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  loaded->encode(text, ids);
  std::cout << nlohmann::json(ids).dump() << "\n";
  return 0;
}

}  // namespace kvr::cli
