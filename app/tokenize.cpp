/// `kvrouter tokenize --tokenizer PATH`: reads UTF-8 text on stdin, prints its token ids as one
/// JSON array (no special tokens added), exactly as the router tokenizes prompts. Operators use
/// it to see why a request did or did not hit an engine's cache.

#include <iostream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "app/flags.hpp"
#include "core/prompt/tokenizer.hpp"

namespace kvr::cli {

int run_tokenize(const std::vector<std::string>& args) {
  std::string path;
  bool json_lines = false;
  flag_reader flags(args);
  while (flags.next()) {
    if (flags.name() == "-h" || flags.name() == "--help") {
      std::cout << "Usage: kvrouter tokenize --tokenizer PATH/tokenizer.json [--json-lines] < text.txt\n"
                   "Prints the token ids of the UTF-8 text on stdin as one JSON array (no special tokens added).\n"
                   "With --json-lines, each stdin line is a JSON string, and each gets its own line of ids.\n";
      return 0;
    }
    if (flags.name() == "--json-lines") {
      json_lines = true;
      continue;
    }
    auto value = flags.name() == "--tokenizer" ? flags.value() : std::nullopt;
    if (!value) {
      std::cerr << "kvrouter tokenize: expected --tokenizer PATH (see --help)\n";
      return 2;
    }
    path = *value;
  }
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
      const nlohmann::json text = nlohmann::json::parse(line, nullptr, false);
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
