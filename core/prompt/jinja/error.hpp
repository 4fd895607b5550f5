#pragma once
/// The two ways a chat template fails: at load (a construct outside the supported subset, or a
/// syntax error: the message names it and its line) and at render (`raise_exception`, a type
/// error, an undefined value used).

#include <stdexcept>
#include <string>

namespace kvr::jinja {

struct render_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct syntax_error : std::runtime_error {
  syntax_error(int line, const std::string& what) : std::runtime_error("line " + std::to_string(line) + ": " + what) {}
};

}  // namespace kvr::jinja
