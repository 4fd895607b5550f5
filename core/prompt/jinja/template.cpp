#include "core/prompt/jinja/template.hpp"

#include <algorithm>
#include <array>

#include "core/prompt/jinja/ast.hpp"
#include "core/prompt/jinja/builtins.hpp"
#include "core/prompt/jinja/error.hpp"

namespace kvr::jinja {

struct compiled_template::program {
  node_list nodes;
};

namespace {

/// A rendered prompt larger than this is refused (a template looping on client input must not
/// grow without bound).
constexpr std::size_t max_output_bytes = 64u << 20;

void check_expression(const expr* e) {
  if (e == nullptr) return;
  if (e->type == expr::kind::filter && !is_known_filter(e->name))
    throw syntax_error(e->line, "unsupported filter '" + e->name + "'");
  if (e->type == expr::kind::test && !is_known_test(e->name))
    throw syntax_error(e->line, "unsupported test '" + e->name + "'");
  for (const auto& operand : e->operands) check_expression(operand.get());
  for (const auto& [name, operand] : e->keywords) check_expression(operand.get());
}

/// Filters and tests are named statically, so unknown ones are refused at load, not mid-request.
void check_nodes(const node_list& nodes) {
  for (const auto& n : nodes) {
    check_expression(n->expression.get());
    check_expression(n->filter.get());
    for (const auto& [condition, body] : n->branches) {
      check_expression(condition.get());
      check_nodes(body);
    }
    check_nodes(n->body);
    check_nodes(n->else_body);
  }
}

bool names_field(const expr* e, std::string_view name) {
  if (e == nullptr) return false;
  if (e->type == expr::kind::attribute && e->name == name) return true;
  if (e->type == expr::kind::subscript && e->operands[1]->type == expr::kind::literal && e->operands[1]->literal.is_string() &&
      e->operands[1]->literal.as_string() == name)
    return true;
  // `message.content | selectattr(...)` and the like still iterate the field.
  return e->type == expr::kind::filter && names_field(e->operands[0].get(), name);
}

bool any_loop_over(const node_list& nodes, std::string_view name) {
  for (const auto& n : nodes) {
    if (n->type == node::kind::for_loop && names_field(n->expression.get(), name)) return true;
    for (const auto& [condition, body] : n->branches)
      if (any_loop_over(body, name)) return true;
    if (any_loop_over(n->body, name) || any_loop_over(n->else_body, name)) return true;
  }
  return false;
}

class renderer {
 public:
  explicit renderer(const dict& globals) : globals_(globals) { frames_.emplace_back(); }

  void render(const node_list& nodes, std::string& out) {
    for (const auto& n : nodes) {
      if (control_ != control::none) return;
      execute(*n, out);
    }
  }

 private:
  enum class control { none, break_loop, continue_loop };
  using frame = std::vector<std::pair<std::string, value>>;

  value lookup(const std::string& name) const {
    for (auto f = frames_.rbegin(); f != frames_.rend(); ++f)
      for (const auto& [key, v] : *f)
        if (key == name) return v;
    if (const value* global = globals_.find(name)) return *global;
    return value::undefined(name);
  }

  void assign(const std::string& name, value v) {
    for (auto& [key, existing] : frames_.back())
      if (key == name) {
        existing = std::move(v);
        return;
      }
    frames_.back().emplace_back(name, std::move(v));
  }

  void execute(const node& n, std::string& out) {
    switch (n.type) {
      case node::kind::text: out += n.text; break;
      case node::kind::output: {
        const value printed = evaluate(*n.expression);
        if (!printed.is_string()) {
          out += printed.str();
          break;
        }
        const std::string& piece = printed.as_string();  // not through str()'s copy
        // A long message's content: room for it and the template's few bytes after it, so the
        // prompt is not doubled in capacity by the next `<|im_end|>`.
        if (piece.size() > (std::size_t{64} << 10) && out.capacity() - out.size() < piece.size())
          out.reserve(out.size() + piece.size() + piece.size() / 16 + 4096);
        out += piece;
        break;
      }
      case node::kind::if_chain:
        for (const auto& [condition, body] : n.branches) {
          if (condition == nullptr || evaluate(*condition).truthy()) {
            render(body, out);
            break;
          }
        }
        break;
      case node::kind::for_loop: run_loop(n, out); break;
      case node::kind::set_value: {
        value v = evaluate(*n.expression);
        if (!n.attribute.empty()) {
          value target = lookup(n.targets[0]);
          if (!target.is_dict() || !target.as_dict().is_namespace)
            throw render_error("line " + std::to_string(n.line) + ": cannot assign attribute on '" + n.targets[0] +
                               "' (only namespace() objects take attributes)");
          target.as_dict().set(n.attribute, std::move(v));
        } else if (n.targets.size() == 1) {
          assign(n.targets[0], std::move(v));
        } else {
          unpack(n.targets, v, n.line);
        }
        break;
      }
      case node::kind::set_block: {
        std::string captured;
        render(n.body, captured);
        assign(n.targets[0], value(std::move(captured)));
        break;
      }
      case node::kind::loop_break: control_ = control::break_loop; break;
      case node::kind::loop_continue: control_ = control::continue_loop; break;
      case node::kind::scoped_body: render(n.body, out); break;
    }
    if (out.size() > max_output_bytes) throw render_error("rendered prompt exceeds 64 MiB");
  }

  void unpack(const std::vector<std::string>& targets, const value& v, int line) {
    const list items = iterate(v);
    if (items.size() != targets.size())
      throw render_error("line " + std::to_string(line) + ": cannot unpack " + std::to_string(items.size()) +
                         " values into " + std::to_string(targets.size()));
    for (std::size_t i = 0; i < targets.size(); ++i) assign(targets[i], items[i]);
  }

  void run_loop(const node& n, std::string& out) {
    // A list is looped over where it is (no template changes a list in place), not copied: a
    // chat of 10^5 messages is 4 MB of values. A dict's keys and a string's characters are
    // made into a list first.
    const value iterated = evaluate(*n.expression);
    list made;
    if (!iterated.is_list()) made = iterate(iterated);
    const list* looped = iterated.is_list() ? &iterated.as_list() : &made;
    if (n.filter) {
      list kept;
      for (const value& item : *looped) {
        frames_.emplace_back();
        bind_targets(n, item);
        const bool keep = evaluate(*n.filter).truthy();
        frames_.pop_back();
        if (keep) kept.push_back(item);
      }
      made = std::move(kept);
      looped = &made;
    }
    const list& items = *looped;
    const auto length = static_cast<std::int64_t>(items.size());
    for (std::int64_t i = 0; i < length; ++i) {
      frames_.emplace_back();
      dict loop;
      loop.items = {{"index", value(i + 1)},
                    {"index0", value(i)},
                    {"revindex", value(length - i)},
                    {"revindex0", value(length - i - 1)},
                    {"first", value(i == 0)},
                    {"last", value(i == length - 1)},
                    {"length", value(length)},
                    {"previtem", i > 0 ? items[static_cast<std::size_t>(i - 1)] : value::undefined("previtem")},
                    {"nextitem", i + 1 < length ? items[static_cast<std::size_t>(i + 1)] : value::undefined("nextitem")}};
      assign("loop", value(std::move(loop)));
      bind_targets(n, items[static_cast<std::size_t>(i)]);
      render(n.body, out);
      frames_.pop_back();
      if (control_ == control::break_loop) {
        control_ = control::none;
        break;
      }
      control_ = control::none;
    }
    if (length == 0) render(n.else_body, out);
  }

  /// `a + b + c ...` (or `~`), left-deep as the parser builds it: its operands evaluated left
  /// to right, and when they are all strings joined into one string sized once. Pairwise, a chat
  /// template's `'<|im_start|>' + role + '\n' + content + '<|im_end|>'` made a new copy of a
  /// message's content per `+`, two alive at once. Anything else (numbers, lists, `~` over
  /// what is not a string), or a chain longer than `longest_joined_chain`, folds pairwise.
  value concatenate_chain(const expr& e) {
    static constexpr std::size_t longest_joined_chain = 16;
    std::array<const expr*, longest_joined_chain> chain;
    std::size_t length = 0;
    const expr* left = &e;
    while (left->type == expr::kind::binary && left->name == e.name && length + 1 < longest_joined_chain) {
      chain[length++] = left->operands[1].get();
      left = left->operands[0].get();
    }
    chain[length++] = left;  // the leftmost operand (or the rest of a longer chain, folded by recursion)
    std::array<value, longest_joined_chain> operands;
    bool all_strings = true;
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < length; ++i) {
      operands[i] = evaluate(*chain[length - 1 - i]);
      all_strings = all_strings && operands[i].is_string();
      if (all_strings) bytes += operands[i].as_string().size();
    }
    if (all_strings) {
      require_buildable_string(bytes);
      std::string joined;
      joined.reserve(bytes);
      for (std::size_t i = 0; i < length; ++i) joined += operands[i].as_string();
      return value(std::move(joined));
    }
    value folded = std::move(operands[0]);
    for (std::size_t i = 1; i < length; ++i) folded = binary_operation(e.name, folded, operands[i]);
    return folded;
  }

  void bind_targets(const node& n, const value& item) {
    if (n.targets.size() == 1) assign(n.targets[0], item);
    else unpack(n.targets, item, n.line);
  }

  std::vector<value> evaluate_all(const std::vector<expr_ptr>& operands, std::size_t from) {
    std::vector<value> values;
    for (std::size_t i = from; i < operands.size(); ++i) values.push_back(evaluate(*operands[i]));
    return values;
  }

  keyword_args evaluate_keywords(const expr& e) {
    keyword_args out;
    for (const auto& [name, operand] : e.keywords) out.emplace_back(name, evaluate(*operand));
    return out;
  }

  value evaluate(const expr& e) {
    try {
      return evaluate_unchecked(e);
    } catch (const render_error& error) {
      const std::string what = error.what();
      if (what.starts_with("line ")) throw;
      throw render_error("line " + std::to_string(e.line) + ": " + what);
    }
  }

  value evaluate_unchecked(const expr& e) {
    switch (e.type) {
      case expr::kind::literal: return e.literal;
      case expr::kind::name: return lookup(e.name);
      case expr::kind::attribute: return attribute(evaluate(*e.operands[0]), e.name);
      case expr::kind::subscript: return subscript(evaluate(*e.operands[0]), evaluate(*e.operands[1]));
      case expr::kind::slice: {
        auto part = [&](std::size_t i) { return e.operands[i] ? evaluate(*e.operands[i]) : value(none_t{}); };
        return slice(evaluate(*e.operands[0]), part(1), part(2), part(3));
      }
      case expr::kind::call: {
        const expr& callee = *e.operands[0];
        std::vector<value> args = evaluate_all(e.operands, 1);
        keyword_args keywords = evaluate_keywords(e);
        if (callee.type == expr::kind::attribute)
          return call_method(evaluate(*callee.operands[0]), callee.name, args, keywords);
        if (callee.type == expr::kind::name) {
          bool known = false;
          value result = call_global(callee.name, args, keywords, known);
          if (known) return result;
          throw render_error("'" + callee.name + "' is undefined");
        }
        throw render_error("this expression is not callable");
      }
      case expr::kind::filter:
        return apply_filter(e.name, evaluate(*e.operands[0]), evaluate_all(e.operands, 1), evaluate_keywords(e));
      case expr::kind::test: {
        const bool result = apply_test(e.name, evaluate(*e.operands[0]), evaluate_all(e.operands, 1));
        return value(e.negated ? !result : result);
      }
      case expr::kind::negate: return value(!evaluate(*e.operands[0]).truthy());
      case expr::kind::unary_minus: {
        const value v = evaluate(*e.operands[0]);
        require_defined(v);
        if (v.is_float()) return value(-v.as_double());
        if (v.is_number()) return value(-v.as_int());
        throw render_error("bad operand type for unary -: '" + std::string(v.type_name()) + "'");
      }
      case expr::kind::binary:
        if (e.name == "+" || e.name == "~") return concatenate_chain(e);
        return binary_operation(e.name, evaluate(*e.operands[0]), evaluate(*e.operands[1]));
      case expr::kind::logical_and: {
        value left = evaluate(*e.operands[0]);
        return left.truthy() ? evaluate(*e.operands[1]) : left;
      }
      case expr::kind::logical_or: {
        value left = evaluate(*e.operands[0]);
        return left.truthy() ? left : evaluate(*e.operands[1]);
      }
      case expr::kind::conditional:
        if (evaluate(*e.operands[1]).truthy()) return evaluate(*e.operands[0]);
        return e.operands[2] ? evaluate(*e.operands[2]) : value::undefined("conditional");
      case expr::kind::list_literal: return value(evaluate_all(e.operands, 0));
      case expr::kind::dict_literal: {
        dict d;
        for (std::size_t i = 0; i + 1 < e.operands.size(); i += 2)
          d.set(evaluate(*e.operands[i]).str(), evaluate(*e.operands[i + 1]));
        return value(std::move(d));
      }
    }
    return {};
  }

  const dict& globals_;
  std::vector<frame> frames_;
  control control_ = control::none;
};

}  // namespace

std::expected<compiled_template, std::string> compiled_template::parse(std::string_view source) {
  try {
    auto p = std::make_shared<program>();
    p->nodes = parse_template(source);
    check_nodes(p->nodes);
    return compiled_template(std::move(p));
  } catch (const syntax_error& error) {
    return std::unexpected(std::string(error.what()));
  }
}

bool compiled_template::loops_over(std::string_view name) const { return any_loop_over(program_->nodes, name); }

std::expected<std::string, std::string> compiled_template::render(const dict& context) const {
  try {
    std::string out;
    renderer(context).render(program_->nodes, out);
    return out;
  } catch (const render_error& error) {
    return std::unexpected(std::string(error.what()));
  }
}

}  // namespace kvr::jinja
