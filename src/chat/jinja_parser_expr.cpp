// The Jinja parser's expressions: Jinja2's precedence (conditional, or, and, not, comparisons,
// + -, ~, * / // %, **, unary, postfix, filters and tests), literals, calls and subscripts.
#include <cstdlib>

#include "chat/jinja_parser.h"

namespace geist::jinja {

// Comma-separated expressions: one alone is itself, more (or a trailing comma) a tuple.
NodeP Parser::parse_tuple(bool with_condexpr, bool explicit_parens,
                          const std::vector<std::string>& extra_ends) {
  int line = peek().line;
  std::vector<NodeP> items;
  bool comma = false;
  for (;;) {
    if (!items.empty()) {
      if (!skip_op(",")) break;
      comma = true;
    }
    const Token& tok = peek();
    bool end = tok.type == Tok::VarEnd || tok.type == Tok::BlockEnd || tok.type == Tok::End ||
               (tok.type == Tok::Op && tok.value == ")");
    for (const auto& e : extra_ends)
      if (tok.type == Tok::Name && tok.value == e) end = true;
    if (end) {
      if (!items.empty()) break;
      if (explicit_parens) break;
      error("Expected an expression, got " + describe(tok));
    }
    items.push_back(parse_expression(with_condexpr));
  }
  if (items.size() == 1 && !comma) return std::move(items[0]);
  auto n = make_node(NK::TupleLit, line);
  n->a = std::move(items);
  return n;
}

NodeP Parser::parse_expression(bool with_condexpr) {
  DepthGuard g(this);
  NodeP e = parse_or();
  if (!with_condexpr) return e;
  while (is_name("if")) {
    int line = next().line;
    auto n = make_node(NK::Cond, line);
    NodeP test = parse_or();
    NodeP other = nullptr;
    if (skip_name("else")) other = parse_expression(true);
    n->a.push_back(std::move(e));
    n->a.push_back(std::move(test));
    n->a.push_back(std::move(other));
    e = std::move(n);
  }
  return e;
}

NodeP Parser::binary(const char* op, NodeP l, NodeP r, int line) {
  auto n = make_node(NK::Binary, line);
  n->name = op;
  n->a.push_back(std::move(l));
  n->a.push_back(std::move(r));
  return n;
}

NodeP Parser::parse_or() {
  NodeP l = parse_and();
  while (is_name("or")) {
    int line = next().line;
    l = binary("or", std::move(l), parse_and(), line);
  }
  return l;
}

NodeP Parser::parse_and() {
  NodeP l = parse_not();
  while (is_name("and")) {
    int line = next().line;
    l = binary("and", std::move(l), parse_not(), line);
  }
  return l;
}

NodeP Parser::parse_not() {
  DepthGuard g(this);
  if (is_name("not")) {
    auto n = make_node(NK::Unary, next().line);
    n->name = "not";
    n->a.push_back(parse_not());
    return n;
  }
  return parse_compare();
}

NodeP Parser::parse_compare() {
  int line = peek().line;
  NodeP e = parse_math1();
  NodeP cmp;
  for (;;) {
    std::string op;
    const Token& tok = peek();
    if (tok.type == Tok::Op && (tok.value == "==" || tok.value == "!=" || tok.value == "<" ||
                                tok.value == ">" || tok.value == "<=" || tok.value == ">=")) {
      op = tok.value;
      next();
    } else if (is_name("in")) {
      op = "in";
      next();
    } else if (is_name("not") && is_name("in", 1)) {
      op = "notin";
      next();
      next();
    } else {
      break;
    }
    if (!cmp) {
      cmp = make_node(NK::Compare, line);
      cmp->a.push_back(std::move(e));
    }
    cmp->ops.push_back(op);
    cmp->a.push_back(parse_math1());
  }
  return cmp ? std::move(cmp) : std::move(e);
}

NodeP Parser::parse_math1() {
  NodeP l = parse_concat();
  while (is_op("+") || is_op("-")) {
    const Token& tok = next();
    std::string op = tok.value;
    l = binary(op == "+" ? "+" : "-", std::move(l), parse_concat(), tok.line);
  }
  return l;
}

NodeP Parser::parse_concat() {
  NodeP l = parse_math2();
  while (is_op("~")) {
    int line = next().line;
    l = binary("~", std::move(l), parse_math2(), line);
  }
  return l;
}

NodeP Parser::parse_math2() {
  NodeP l = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Token& tok = next();
    std::string op = tok.value;
    const char* o = op == "*" ? "*" : op == "/" ? "/" : op == "//" ? "//" : "%";
    l = binary(o, std::move(l), parse_pow(), tok.line);
  }
  return l;
}

NodeP Parser::parse_pow() {
  NodeP l = parse_unary(true);
  while (is_op("**")) {
    int line = next().line;
    l = binary("**", std::move(l), parse_unary(true), line);
  }
  return l;
}

NodeP Parser::parse_unary(bool with_filter) {
  DepthGuard g(this);
  NodeP n;
  if (is_op("-") || is_op("+")) {
    const Token& tok = next();
    n = make_node(NK::Unary, tok.line);
    n->name = tok.value;
    n->a.push_back(parse_unary(false));
  } else {
    n = parse_primary();
  }
  n = parse_postfix(std::move(n));
  if (with_filter) n = parse_filter_expr(std::move(n));
  return n;
}

NodeP Parser::parse_primary() {
  DepthGuard g(this);
  const Token& tok = peek();
  int line = tok.line;
  if (tok.type == Tok::Name) {
    std::string v = next().value;
    auto n = make_node(NK::Literal, line);
    if (v == "true" || v == "True")
      n->lit = Value::boolean(true);
    else if (v == "false" || v == "False")
      n->lit = Value::boolean(false);
    else if (v == "none" || v == "None")
      n->lit = Value::none();
    else {
      n->kind = NK::Name;
      n->name = v;
    }
    return n;
  }
  if (tok.type == Tok::String) {
    std::string s;
    while (peek().type == Tok::String) s += next().value;
    auto n = make_node(NK::Literal, line);
    n->lit = Value::string(std::move(s));
    return n;
  }
  if (tok.type == Tok::Int || tok.type == Tok::Float) {
    auto n = make_node(NK::Literal, line);
    std::string v = next().value;
    if (tok.type == Tok::Float) {
      n->lit = Value::number(std::strtod(v.c_str(), nullptr));
    } else {
      errno = 0;
      long long x = std::strtoll(v.c_str(), nullptr, 10);
      if (errno == ERANGE)
        n->lit = Value::number(std::strtod(v.c_str(), nullptr));
      else
        n->lit = Value::integer(x);
    }
    return n;
  }
  if (skip_op("(")) {
    NodeP n = parse_tuple(true, true);
    expect_op(")");
    return n;
  }
  if (skip_op("[")) {
    auto n = make_node(NK::ListLit, line);
    while (!is_op("]")) {
      if (!n->a.empty()) expect_op(",");
      if (is_op("]")) break;
      n->a.push_back(parse_expression(true));
    }
    expect_op("]");
    return n;
  }
  if (skip_op("{")) {
    auto n = make_node(NK::DictLit, line);
    while (!is_op("}")) {
      if (!n->a.empty()) expect_op(",");
      if (is_op("}")) break;
      n->a.push_back(parse_expression(true));
      expect_op(":");
      n->a.push_back(parse_expression(true));
    }
    expect_op("}");
    return n;
  }
  error("unexpected " + describe(tok));
}

NodeP Parser::parse_postfix(NodeP n) {
  for (;;) {
    if (is_op(".") || is_op("[")) {
      n = parse_subscript(std::move(n));
    } else if (is_op("(")) {
      n = parse_call(std::move(n));
    } else {
      return n;
    }
  }
}

NodeP Parser::parse_filter_expr(NodeP n) {
  for (;;) {
    if (is_op("|")) {
      n = parse_filter_chain(std::move(n), false);
    } else if (is_name("is")) {
      n = parse_test(std::move(n));
    } else if (is_op("(")) {
      n = parse_call(std::move(n));
    } else {
      return n;
    }
  }
}

NodeP Parser::parse_subscript(NodeP obj) {
  DepthGuard g(this);
  const Token& tok = next();
  int line = tok.line;
  if (tok.value == ".") {
    const Token& attr = next();
    if (attr.type == Tok::Name) {
      auto n = make_node(NK::Attr, line);
      n->name = attr.value;
      n->a.push_back(std::move(obj));
      return n;
    }
    if (attr.type == Tok::Int) {
      auto n = make_node(NK::Item, line);
      n->a.push_back(std::move(obj));
      auto idx = make_node(NK::Literal, line);
      idx->lit = Value::integer(std::strtoll(attr.value.c_str(), nullptr, 10));
      n->a.push_back(std::move(idx));
      return n;
    }
    error("expected name or number");
  }
  // '['
  std::vector<NodeP> args;
  bool comma = false;
  while (!is_op("]")) {
    if (!args.empty()) {
      expect_op(",");
      comma = true;
      if (is_op("]")) break;
    }
    args.push_back(parse_subscribed());
  }
  expect_op("]");
  if (args.empty()) error("expected subscript expression");
  auto n = make_node(NK::Item, line);
  n->a.push_back(std::move(obj));
  if (args.size() == 1 && !comma) {
    if (args[0]->kind == NK::Slice && args[0]->a.empty() == false && args[0]->flag) {
      args[0]->a.insert(args[0]->a.begin(), std::move(n->a[0]));
      args[0]->flag = false;
      return std::move(args[0]);
    }
    n->a.push_back(std::move(args[0]));
  } else {
    auto tup = make_node(NK::TupleLit, line);
    tup->a = std::move(args);
    n->a.push_back(std::move(tup));
  }
  return n;
}

// One subscript: an expression or a slice start:stop:step (a Slice node with flag set and
// a = start, stop, step, each possibly null; the object is inserted first by the caller).
NodeP Parser::parse_subscribed() {
  int line = peek().line;
  NodeP start;
  if (!is_op(":")) {
    start = parse_expression(true);
    if (!is_op(":")) return start;
  }
  next();  // ':'
  auto n = make_node(NK::Slice, line);
  n->flag = true;
  n->a.push_back(std::move(start));
  n->a.push_back(is_op("]") || is_op(",") || is_op(":") ? nullptr : parse_expression(true));
  if (skip_op(":")) {
    n->a.push_back(is_op("]") || is_op(",") ? nullptr : parse_expression(true));
  } else {
    n->a.push_back(nullptr);
  }
  return n;
}

void Parser::parse_args(Node* n) {
  expect_op("(");
  bool first = true;
  while (!is_op(")")) {
    if (!first) {
      expect_op(",");
      if (is_op(")")) break;
    }
    first = false;
    if (skip_op("*")) {
      n->dyn_args = parse_expression(true);
    } else if (skip_op("**")) {
      n->dyn_kwargs = parse_expression(true);
    } else if (peek().type == Tok::Name && is_op("=", 1)) {
      std::string key = next().value;
      next();
      n->kw.emplace_back(key, parse_expression(true));
    } else {
      if (!n->kw.empty()) error("positional argument follows keyword argument");
      n->a.push_back(parse_expression(true));
    }
  }
  expect_op(")");
}

NodeP Parser::parse_call(NodeP fn) {
  DepthGuard g(this);
  auto n = make_node(NK::Call, peek().line);
  n->a.push_back(std::move(fn));
  parse_args(n.get());
  return n;
}

// `|name(args)|name2...` applied to `obj` (null: the {% filter %} / set block input).
NodeP Parser::parse_filter_chain(NodeP obj, bool start_inline) {
  bool first = true;
  while (first ? (start_inline || is_op("|")) : is_op("|")) {
    DepthGuard g(this);
    if (!(first && start_inline)) next();  // '|'
    first = false;
    auto n = make_node(NK::Filter, peek().line);
    n->name = expect_name();
    while (is_op(".") && peek(1).type == Tok::Name) {
      next();
      n->name += "." + next().value;
    }
    n->a.push_back(std::move(obj));
    if (is_op("(")) parse_args(n.get());
    obj = std::move(n);
  }
  return obj;
}

NodeP Parser::parse_test(NodeP obj) {
  DepthGuard g(this);
  int line = next().line;  // 'is'
  auto n = make_node(NK::Test, line);
  n->flag = skip_name("not");
  n->name = expect_name();
  while (is_op(".") && peek(1).type == Tok::Name) {
    next();
    n->name += "." + next().value;
  }
  n->a.push_back(std::move(obj));
  const Token& tok = peek();
  if (is_op("(")) {
    parse_args(n.get());
  } else if ((tok.type == Tok::Name || tok.type == Tok::String || tok.type == Tok::Int ||
              tok.type == Tok::Float || is_op("[") || is_op("{")) &&
             !(tok.type == Tok::Name &&
               (tok.value == "else" || tok.value == "or" || tok.value == "and"))) {
    if (is_name("is")) error("You cannot chain multiple tests with is");
    NodeP arg = parse_primary();
    n->a.push_back(parse_postfix(std::move(arg)));
  }
  return n;
}

}  // namespace geist::jinja
