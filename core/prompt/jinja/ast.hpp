#pragma once
/// The parsed form of a chat template: expressions and statements of the Jinja subset that
/// HuggingFace chat templates use.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/prompt/jinja/value.hpp"

namespace kvr::jinja {

struct expr;
using expr_ptr = std::unique_ptr<expr>;

struct expr {
  enum class kind {
    literal,      ///< `value`
    name,         ///< `name`
    attribute,    ///< operands[0].name
    subscript,    ///< operands[0][operands[1]]
    slice,        ///< operands[0][operands[1]:operands[2]:operands[3]] (null = omitted)
    call,         ///< operands[0](operands[1..], keywords)
    filter,       ///< operands[0] | name(operands[1..], keywords)
    test,         ///< operands[0] is [not] name(operands[1..])
    negate,       ///< not operands[0]
    unary_minus,  ///< -operands[0]
    binary,       ///< operands[0] op operands[1] (arithmetic, comparison, `in`, `~`)
    logical_and,
    logical_or,
    conditional,  ///< operands[0] if operands[1] else operands[2] (null: undefined)
    list_literal,
    dict_literal,  ///< keys and values alternate in operands
  };
  kind type = kind::literal;
  int line = 0;
  value literal;
  std::string name;  ///< name, attribute, filter or test name, or the binary operator
  bool negated = false;
  std::vector<expr_ptr> operands;
  std::vector<std::pair<std::string, expr_ptr>> keywords;
};

struct node;
using node_list = std::vector<std::unique_ptr<node>>;

struct node {
  enum class kind {
    text,           ///< `text`
    output,         ///< {{ expression }}
    if_chain,       ///< branches: (condition, body); a null condition is `else`
    for_loop,       ///< for targets in expression [if filter]: body [else: else_body]
    set_value,      ///< set targets[0][.attribute] = expression
    set_block,      ///< set targets[0] %} body {% endset
    loop_break,
    loop_continue,
    scoped_body,    ///< a block rendered in place (`generation`)
  };
  kind type = kind::text;
  int line = 0;
  std::string text;
  expr_ptr expression;
  expr_ptr filter;
  std::vector<std::string> targets;
  std::string attribute;  ///< set ns.attribute = ...
  std::vector<std::pair<expr_ptr, node_list>> branches;
  node_list body;
  node_list else_body;
};

/// Parses template source with HuggingFace's settings (`trim_blocks`, `lstrip_blocks`, no
/// trailing newline kept). Throws `syntax_error` naming the line and the construct.
[[nodiscard]] node_list parse_template(std::string_view source);

}  // namespace kvr::jinja
