#pragma once
/// Reading test data files.

#include <fstream>
#include <sstream>
#include <string>

namespace kvr::testing {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace kvr::testing
