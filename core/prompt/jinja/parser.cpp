/// Recursive-descent parser for the Jinja subset, with Jinja's operator precedence (from loosest
/// to tightest): conditional, `or`, `and`, `not`, comparisons and `in`, `+ -`, `~`, `* / // %`,
/// unary minus, then postfix (`.attr`, `[i]`, `[a:b]`, calls), filters and `is` tests.

#include <charconv>
#include <cstring>
#include <set>

#include "core/prompt/jinja/ast.hpp"
#include "core/prompt/jinja/error.hpp"
#include "core/prompt/jinja/lexer.hpp"
#include "core/prompt/jinja/utf8.hpp"

namespace kvr::jinja {

namespace {

struct token {
  enum class kind { name, string, integer, floating, op, end };
  kind type = kind::end;
  std::string text;
};

std::vector<token> tokenize_expression(std::string_view s, int line) {
  std::vector<token> tokens;
  std::size_t i = 0;
  static constexpr std::string_view two_char_ops[] = {"==", "!=", "<=", ">=", "//", "**"};
  while (i < s.size()) {
    const char c = s[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const std::size_t start = i;
      while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
      tokens.push_back({token::kind::name, std::string(s.substr(start, i - start))});
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      const std::size_t start = i;
      bool is_float = false;
      while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
      if (i + 1 < s.size() && s[i] == '.' && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
        is_float = true;
        ++i;
        while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
      }
      if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        std::size_t j = i + 1;
        if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
        if (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) {
          is_float = true;
          i = j;
          while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
        }
      }
      std::string number(s.substr(start, i - start));
      std::erase(number, '_');
      tokens.push_back({is_float ? token::kind::floating : token::kind::integer, number});
    } else if (c == '\'' || c == '"') {
      std::string text;
      ++i;
      while (i < s.size() && s[i] != c) {
        if (s[i] == '\\' && i + 1 < s.size()) {
          const char e = s[++i];
          switch (e) {
            case 'n': text += '\n'; break;
            case 't': text += '\t'; break;
            case 'r': text += '\r'; break;
            case '0': text += '\0'; break;
            case '\\': text += '\\'; break;
            case '\'': text += '\''; break;
            case '"': text += '"'; break;
            case '\n': break;
            case 'x':
            case 'u':
            case 'U': {
              const std::size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
              std::uint32_t code = 0;
              const auto hex = s.substr(i + 1, digits);
              if (hex.size() != digits || std::from_chars(hex.data(), hex.data() + digits, code, 16).ptr != hex.data() + digits)
                throw syntax_error(line, std::string("malformed \\") + e + " escape");
              append_utf8(text, code);
              i += digits;
              break;
            }
            default:
              text += '\\';
              text += e;
          }
        } else {
          text += s[i];
        }
        ++i;
      }
      if (i >= s.size()) throw syntax_error(line, "unterminated string literal");
      ++i;
      tokens.push_back({token::kind::string, std::move(text)});
    } else {
      std::string op(1, c);
      for (std::string_view two : two_char_ops)
        if (s.substr(i, 2) == two) op = two;
      if (std::strchr("+-*/%~<>=!.,:|()[]{}", c) == nullptr || op == "!")
        throw syntax_error(line, std::string("unexpected character '") + c + "'");
      i += op.size();
      tokens.push_back({token::kind::op, std::move(op)});
    }
  }
  tokens.push_back({token::kind::end, ""});
  return tokens;
}

class expression_parser {
 public:
  expression_parser(std::string_view text, int line) : tokens_(tokenize_expression(text, line)), line_(line) {}

  expr_ptr parse_expression() { return parse_conditional(); }

  [[nodiscard]] bool at_end() const { return peek().type == token::kind::end; }
  [[nodiscard]] bool peek_name(std::string_view name) const {
    return peek().type == token::kind::name && peek().text == name;
  }
  [[nodiscard]] bool peek_op(std::string_view op) const { return peek().type == token::kind::op && peek().text == op; }

  std::string expect_name() {
    if (peek().type != token::kind::name) fail("expected a name");
    return tokens_[position_++].text;
  }
  void expect_op(std::string_view op) {
    if (!peek_op(op)) fail("expected '" + std::string(op) + "'");
    ++position_;
  }
  void expect_end() {
    if (!at_end()) fail("unexpected '" + peek().text + "'");
  }
  bool accept_name(std::string_view name) {
    if (!peek_name(name)) return false;
    ++position_;
    return true;
  }
  bool accept_op(std::string_view op) {
    if (!peek_op(op)) return false;
    ++position_;
    return true;
  }
  [[noreturn]] void fail(const std::string& what) const { throw syntax_error(line_, what); }

 private:
  [[nodiscard]] const token& peek(std::size_t ahead = 0) const {
    return tokens_[std::min(position_ + ahead, tokens_.size() - 1)];
  }

  expr_ptr make(expr::kind type, std::string name = {}) {
    auto e = std::make_unique<expr>();
    e->type = type;
    e->line = line_;
    e->name = std::move(name);
    return e;
  }
  expr_ptr make_binary(expr::kind type, std::string op, expr_ptr left, expr_ptr right) {
    auto e = make(type, std::move(op));
    e->operands.push_back(std::move(left));
    e->operands.push_back(std::move(right));
    return e;
  }

  expr_ptr parse_conditional() {
    expr_ptr body = parse_or();
    while (accept_name("if")) {
      auto e = make(expr::kind::conditional);
      e->operands.push_back(std::move(body));
      e->operands.push_back(parse_or());
      e->operands.push_back(accept_name("else") ? parse_conditional() : nullptr);
      body = std::move(e);
    }
    return body;
  }
  expr_ptr parse_or() {
    expr_ptr left = parse_and();
    while (accept_name("or")) left = make_binary(expr::kind::logical_or, "or", std::move(left), parse_and());
    return left;
  }
  expr_ptr parse_and() {
    expr_ptr left = parse_not();
    while (accept_name("and")) left = make_binary(expr::kind::logical_and, "and", std::move(left), parse_not());
    return left;
  }
  expr_ptr parse_not() {
    if (accept_name("not")) {
      auto e = make(expr::kind::negate);
      e->operands.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }
  expr_ptr parse_compare() {
    expr_ptr left = parse_math1();
    while (true) {
      std::string op;
      if (peek().type == token::kind::op &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" || peek().text == ">" ||
           peek().text == "<=" || peek().text == ">=")) {
        op = tokens_[position_++].text;
      } else if (accept_name("in")) {
        op = "in";
      } else if (peek_name("not") && peek(1).type == token::kind::name && peek(1).text == "in") {
        position_ += 2;
        op = "not in";
      } else {
        return left;
      }
      left = make_binary(expr::kind::binary, op, std::move(left), parse_math1());
    }
  }
  expr_ptr parse_math1() {
    expr_ptr left = parse_concat();
    while (peek_op("+") || peek_op("-")) {
      std::string op = tokens_[position_++].text;
      left = make_binary(expr::kind::binary, op, std::move(left), parse_concat());
    }
    return left;
  }
  expr_ptr parse_concat() {
    expr_ptr left = parse_math2();
    while (accept_op("~")) left = make_binary(expr::kind::binary, "~", std::move(left), parse_math2());
    return left;
  }
  expr_ptr parse_math2() {
    expr_ptr left = parse_unary(true);
    while (peek_op("*") || peek_op("/") || peek_op("//") || peek_op("%")) {
      std::string op = tokens_[position_++].text;
      left = make_binary(expr::kind::binary, op, std::move(left), parse_unary(true));
    }
    if (peek_op("**")) fail("unsupported construct '**'");
    return left;
  }
  expr_ptr parse_unary(bool with_filters) {
    expr_ptr operand;
    if (accept_op("-")) {
      operand = make(expr::kind::unary_minus);
      operand->operands.push_back(parse_unary(false));
    } else if (accept_op("+")) {
      operand = parse_unary(false);
    } else {
      operand = parse_postfix(parse_primary());
    }
    if (with_filters) return parse_filters(std::move(operand));
    return operand;
  }

  expr_ptr parse_primary() {
    const token& t = peek();
    switch (t.type) {
      case token::kind::name: {
        ++position_;
        auto e = make(expr::kind::literal);
        if (t.text == "true" || t.text == "True") e->literal = true;
        else if (t.text == "false" || t.text == "False") e->literal = false;
        else if (t.text == "none" || t.text == "None") e->literal = none_t{};
        else e = make(expr::kind::name, t.text);
        return e;
      }
      case token::kind::string: {
        std::string text;
        while (peek().type == token::kind::string) text += tokens_[position_++].text;  // 'a' 'b' concatenates
        auto e = make(expr::kind::literal);
        e->literal = std::move(text);
        return e;
      }
      case token::kind::integer: {
        ++position_;
        std::int64_t number = 0;
        std::from_chars(t.text.data(), t.text.data() + t.text.size(), number);
        auto e = make(expr::kind::literal);
        e->literal = number;
        return e;
      }
      case token::kind::floating: {
        ++position_;
        auto e = make(expr::kind::literal);
        e->literal = std::stod(t.text);
        return e;
      }
      case token::kind::op: {
        if (accept_op("(")) {
          expr_ptr inner = parse_expression();
          if (accept_op(",")) {
            auto tuple = make(expr::kind::list_literal);  // tuples behave as lists here
            tuple->operands.push_back(std::move(inner));
            while (!peek_op(")")) {
              tuple->operands.push_back(parse_expression());
              if (!accept_op(",")) break;
            }
            inner = std::move(tuple);
          }
          expect_op(")");
          return inner;
        }
        if (accept_op("[")) {
          auto list_expr = make(expr::kind::list_literal);
          while (!peek_op("]")) {
            list_expr->operands.push_back(parse_expression());
            if (!accept_op(",")) break;
          }
          expect_op("]");
          return list_expr;
        }
        if (accept_op("{")) {
          auto dict_expr = make(expr::kind::dict_literal);
          while (!peek_op("}")) {
            dict_expr->operands.push_back(parse_expression());
            expect_op(":");
            dict_expr->operands.push_back(parse_expression());
            if (!accept_op(",")) break;
          }
          expect_op("}");
          return dict_expr;
        }
        break;
      }
      default: break;
    }
    fail(t.type == token::kind::end ? "expected an expression" : "unexpected '" + t.text + "'");
  }

  void parse_call_arguments(expr& call) {
    while (!peek_op(")")) {
      if (peek().type == token::kind::name && peek(1).type == token::kind::op && peek(1).text == "=") {
        std::string key = tokens_[position_].text;
        position_ += 2;
        call.keywords.emplace_back(std::move(key), parse_expression());
      } else {
        call.operands.push_back(parse_expression());
      }
      if (!accept_op(",")) break;
    }
    expect_op(")");
  }

  expr_ptr parse_postfix(expr_ptr target) {
    while (true) {
      if (accept_op(".")) {
        auto e = make(expr::kind::attribute, expect_name());
        e->operands.push_back(std::move(target));
        target = std::move(e);
      } else if (accept_op("[")) {
        target = parse_subscript(std::move(target));
      } else if (accept_op("(")) {
        auto e = make(expr::kind::call);
        e->operands.push_back(std::move(target));
        parse_call_arguments(*e);
        target = std::move(e);
      } else {
        return target;
      }
    }
  }

  expr_ptr parse_subscript(expr_ptr target) {
    std::vector<expr_ptr> parts;
    bool is_slice = false;
    auto part = [&]() -> expr_ptr {
      if (peek_op(":") || peek_op("]")) return nullptr;
      return parse_expression();
    };
    parts.push_back(part());
    while (accept_op(":")) {
      is_slice = true;
      parts.push_back(part());
    }
    expect_op("]");
    if (!is_slice) {
      auto e = make(expr::kind::subscript);
      e->operands.push_back(std::move(target));
      e->operands.push_back(std::move(parts[0]));
      return e;
    }
    if (parts.size() > 3) fail("a slice takes at most three parts");
    auto e = make(expr::kind::slice);
    e->operands.push_back(std::move(target));
    for (std::size_t i = 0; i < 3; ++i) e->operands.push_back(i < parts.size() ? std::move(parts[i]) : nullptr);
    return e;
  }

  expr_ptr parse_filters(expr_ptr target) {
    while (true) {
      if (accept_op("|")) {
        auto e = make(expr::kind::filter, expect_name());
        e->operands.push_back(std::move(target));
        if (accept_op("(")) parse_call_arguments(*e);
        target = std::move(e);
      } else if (accept_name("is")) {
        auto e = make(expr::kind::test);
        e->negated = accept_name("not");
        e->name = peek_name("none") || peek_name("true") || peek_name("false") ? tokens_[position_++].text : expect_name();
        e->operands.push_back(std::move(target));
        if (accept_op("(")) {
          parse_call_arguments(*e);
        } else if (peek().type == token::kind::integer || peek().type == token::kind::string) {
          e->operands.push_back(parse_primary());
        }
        target = std::move(e);
      } else {
        return target;
      }
    }
  }

  std::vector<token> tokens_;
  std::size_t position_ = 0;
  int line_;
};

/// Statement keywords of Jinja outside the subset, rejected by name.
const std::set<std::string, std::less<>> unsupported_statements = {
    "macro", "call", "filter", "include", "import", "from", "extends", "block", "raw", "with", "do", "autoescape"};

class template_parser {
 public:
  explicit template_parser(std::vector<chunk> chunks) : chunks_(std::move(chunks)) {}

  node_list parse_all() {
    node_list nodes = parse_until({});
    if (position_ < chunks_.size()) throw syntax_error(chunks_[position_].line, "unexpected end tag");
    return nodes;
  }

 private:
  /// Parses nodes until a statement whose keyword is one of `stops` (left unconsumed).
  node_list parse_until(const std::set<std::string, std::less<>>& stops) {
    node_list nodes;
    while (position_ < chunks_.size()) {
      const chunk& c = chunks_[position_];
      if (c.type == chunk::kind::text) {
        nodes.push_back(make_node(node::kind::text, c.line));
        nodes.back()->text = c.body;
        ++position_;
        continue;
      }
      if (c.type == chunk::kind::output) {
        expression_parser p(c.body, c.line);
        auto n = make_node(node::kind::output, c.line);
        n->expression = p.parse_expression();
        p.expect_end();
        nodes.push_back(std::move(n));
        ++position_;
        continue;
      }
      const std::string keyword = statement_keyword(c);
      if (stops.contains(keyword)) return nodes;
      nodes.push_back(parse_statement(keyword));
    }
    if (!stops.empty())
      throw syntax_error(chunks_.empty() ? 1 : chunks_.back().line,
                         "unexpected end of template, expected '" + *stops.rbegin() + "'");
    return nodes;
  }

  static std::string statement_keyword(const chunk& c) {
    expression_parser p(c.body, c.line);
    return p.at_end() ? std::string() : p.expect_name();
  }

  std::unique_ptr<node> make_node(node::kind type, int line) {
    auto n = std::make_unique<node>();
    n->type = type;
    n->line = line;
    return n;
  }

  /// Consumes the current statement tag, returning a parser positioned after its keyword.
  expression_parser open_statement() {
    const chunk& c = chunks_[position_++];
    expression_parser p(c.body, c.line);
    p.expect_name();
    return p;
  }

  void expect_statement(std::string_view keyword) {
    if (position_ >= chunks_.size() || statement_keyword(chunks_[position_]) != keyword)
      throw syntax_error(position_ < chunks_.size() ? chunks_[position_].line : 0,
                         "expected '" + std::string(keyword) + "'");
    expression_parser p = open_statement();
    p.expect_end();
  }

  std::unique_ptr<node> parse_statement(const std::string& keyword) {
    const int line = chunks_[position_].line;
    if (keyword == "if") return parse_if(line);
    if (keyword == "for") return parse_for(line);
    if (keyword == "set") return parse_set(line);
    if (keyword == "break" || keyword == "continue") {
      open_statement().expect_end();
      return make_node(keyword == "break" ? node::kind::loop_break : node::kind::loop_continue, line);
    }
    if (keyword == "generation") {  // HuggingFace's assistant-mask marker: renders its body
      open_statement().expect_end();
      auto n = make_node(node::kind::scoped_body, line);
      n->body = parse_until({"endgeneration"});
      expect_statement("endgeneration");
      return n;
    }
    if (unsupported_statements.contains(keyword))
      throw syntax_error(line, "unsupported construct '{% " + keyword + " %}'");
    throw syntax_error(line, keyword.empty() ? "empty {% %} tag" : "unknown statement '" + keyword + "'");
  }

  std::unique_ptr<node> parse_if(int line) {
    auto n = make_node(node::kind::if_chain, line);
    expression_parser p = open_statement();
    expr_ptr condition = p.parse_expression();
    p.expect_end();
    while (true) {
      node_list body = parse_until({"elif", "else", "endif"});
      n->branches.emplace_back(std::move(condition), std::move(body));
      if (position_ >= chunks_.size()) throw syntax_error(line, "unclosed {% if %}");
      const std::string next = statement_keyword(chunks_[position_]);
      expression_parser q = open_statement();
      if (next == "endif") {
        q.expect_end();
        return n;
      }
      if (next == "else") {
        q.expect_end();
        n->branches.emplace_back(nullptr, parse_until({"endif"}));
        expect_statement("endif");
        return n;
      }
      condition = q.parse_expression();
      q.expect_end();
    }
  }

  std::unique_ptr<node> parse_for(int line) {
    auto n = make_node(node::kind::for_loop, line);
    expression_parser p = open_statement();
    n->targets.push_back(p.expect_name());
    while (p.accept_op(",")) n->targets.push_back(p.expect_name());
    if (!p.accept_name("in")) p.fail("expected 'in' in {% for %}");
    n->expression = p.parse_expression();
    // `for x in xs if cond`: parse_expression took `xs if cond` as a conditional without else.
    if (n->expression->type == expr::kind::conditional && !n->expression->operands[2]) {
      n->filter = std::move(n->expression->operands[1]);
      n->expression = std::move(n->expression->operands[0]);
    }
    if (p.accept_name("recursive")) p.fail("unsupported construct 'recursive' loops");
    p.expect_end();
    n->body = parse_until({"else", "endfor"});
    if (position_ < chunks_.size() && statement_keyword(chunks_[position_]) == "else") {
      open_statement().expect_end();
      n->else_body = parse_until({"endfor"});
    }
    expect_statement("endfor");
    return n;
  }

  std::unique_ptr<node> parse_set(int line) {
    expression_parser p = open_statement();
    std::string target = p.expect_name();
    std::string attribute;
    if (p.accept_op(".")) attribute = p.expect_name();
    if (p.at_end()) {
      if (!attribute.empty()) p.fail("a block {% set %} takes a plain name");
      auto n = make_node(node::kind::set_block, line);
      n->targets.push_back(std::move(target));
      n->body = parse_until({"endset"});
      expect_statement("endset");
      return n;
    }
    auto n = make_node(node::kind::set_value, line);
    n->targets.push_back(std::move(target));
    if (attribute.empty()) {
      while (p.accept_op(",")) n->targets.push_back(p.expect_name());
    }
    n->attribute = std::move(attribute);
    p.expect_op("=");
    n->expression = p.parse_expression();
    p.expect_end();
    return n;
  }

  std::vector<chunk> chunks_;
  std::size_t position_ = 0;
};

}  // namespace

node_list parse_template(std::string_view source) { return template_parser(split_template(source)).parse_all(); }

}  // namespace kvr::jinja
