// The Jinja parser: Jinja2's grammar (its parser.py precedence: conditional, or, and, not,
// comparisons, + -, ~, * / // %, **, unary, postfix, filters and tests) into the tree of
// jinja_ast.h. Nesting is counted and bounded so that a hostile template cannot overflow the
// stack.
#include <cstdlib>

#include "chat/jinja_ast.h"

namespace geist::jinja {
namespace {

NodeP make(NK kind, int line) {
  auto n = std::make_unique<Node>();
  n->kind = kind;
  n->line = line;
  return n;
}

class Parser {
 public:
  Parser(std::vector<Token> toks, int max_depth) : t_(std::move(toks)), max_depth_(max_depth) {}

  std::vector<NodeP> parse_all() {
    std::vector<NodeP> body = subparse({});
    if (peek().type != Tok::End) error("unexpected '" + peek().value + "'");
    return body;
  }

 private:
  std::vector<Token> t_;
  size_t p_ = 0;
  int depth_ = 0;
  int max_depth_;

  struct DepthGuard {
    Parser* p;
    explicit DepthGuard(Parser* q) : p(q) {
      if (++p->depth_ > p->max_depth_)
        fail_limit("template nesting deeper than max_depth (" + std::to_string(p->max_depth_) +
                   ")");
    }
    ~DepthGuard() { --p->depth_; }
  };

  const Token& peek(size_t ahead = 0) const {
    size_t k = p_ + ahead;
    return k < t_.size() ? t_[k] : t_.back();
  }
  const Token& next() {
    const Token& tok = peek();
    if (p_ < t_.size() - 1) ++p_;
    return tok;
  }
  [[noreturn]] void error(const std::string& msg) const { throw SyntaxError{peek().line, msg}; }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).type == Tok::Op && peek(ahead).value == op;
  }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).type == Tok::Name && peek(ahead).value == name;
  }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  static std::string describe(const Token& tok) {
    switch (tok.type) {
      case Tok::End:
        return "end of template";
      case Tok::BlockEnd:
        return "end of statement block";
      case Tok::VarEnd:
        return "end of print statement";
      default:
        return "'" + tok.value + "'";
    }
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) error(std::string("expected token '") + op + "', got " + describe(peek()));
  }
  std::string expect_name() {
    if (peek().type != Tok::Name) error("expected token 'name', got " + describe(peek()));
    return next().value;
  }
  void expect_block_end() {
    if (peek().type != Tok::BlockEnd)
      error("expected token 'end of statement block', got " + describe(peek()));
    next();
  }

  // Statements up to a block tag named in `ends` (left unconsumed: the name is next).
  std::vector<NodeP> subparse(const std::vector<std::string>& ends) {
    DepthGuard g(this);
    std::vector<NodeP> body;
    for (;;) {
      const Token& tok = peek();
      if (tok.type == Tok::End) {
        if (!ends.empty()) {
          std::string want;
          for (const auto& e : ends) want += (want.empty() ? "'" : " or '") + e + "'";
          error("Unexpected end of template. Jinja was looking for the following tags: " + want +
                ".");
        }
        return body;
      }
      if (tok.type == Tok::Text) {
        auto n = make(NK::Text, tok.line);
        n->name = tok.value;
        body.push_back(std::move(n));
        next();
      } else if (tok.type == Tok::VarBegin) {
        next();
        auto n = make(NK::Output, tok.line);
        n->a.push_back(parse_tuple(true, false));
        if (peek().type != Tok::VarEnd)
          error("expected token 'end of print statement', got " + describe(peek()));
        next();
        body.push_back(std::move(n));
      } else if (tok.type == Tok::BlockBegin) {
        if (peek(1).type == Tok::Name) {
          for (const auto& e : ends)
            if (peek(1).value == e) {
              next();
              return body;
            }
        }
        next();
        body.push_back(parse_statement());
      } else {
        error("unexpected " + describe(tok));
      }
    }
  }

  // Parses statements up to one of `ends`, consumes the end name and returns which it was.
  std::string body_until(std::vector<NodeP>* body, const std::vector<std::string>& ends) {
    *body = subparse(ends);
    return next().value;
  }

  NodeP parse_statement() {
    DepthGuard g(this);
    const Token& tok = peek();
    if (tok.type != Tok::Name) error("tag name expected");
    std::string tag = tok.value;
    int line = tok.line;
    next();
    NodeP n;
    if (tag == "for") {
      n = parse_for(line);
    } else if (tag == "if") {
      n = parse_if(line);
    } else if (tag == "set") {
      n = parse_set(line);
    } else if (tag == "macro") {
      n = make(NK::Macro, line);
      n->name = expect_name();
      parse_signature(n.get());
      expect_block_end();
      body_until(&n->body, {"endmacro"});
    } else if (tag == "call") {
      n = make(NK::CallBlock, line);
      n->a.push_back(nullptr);
      if (is_op("(")) parse_signature(n.get());
      NodeP call = parse_expression(true);
      if (call->kind != NK::Call) error("expected call");
      n->a[0] = std::move(call);
      expect_block_end();
      body_until(&n->body, {"endcall"});
    } else if (tag == "filter") {
      n = make(NK::FilterBlock, line);
      n->a.push_back(parse_filter_chain(nullptr, true));
      expect_block_end();
      body_until(&n->body, {"endfilter"});
    } else if (tag == "with") {
      n = make(NK::With, line);
      while (peek().type != Tok::BlockEnd) {
        if (!n->params.empty()) expect_op(",");
        n->params.push_back(expect_name());
        expect_op("=");
        n->a.push_back(parse_expression(true));
      }
      expect_block_end();
      body_until(&n->body, {"endwith"});
    } else if (tag == "generation") {
      n = make(NK::Block, line);
      expect_block_end();
      body_until(&n->body, {"endgeneration"});
    } else if (tag == "break" || tag == "continue") {
      n = make(tag == "break" ? NK::Break : NK::Continue, line);
    } else {
      p_--;
      error("Encountered unknown tag '" + tag + "'.");
    }
    expect_block_end();
    return n;
  }

  NodeP parse_for(int line) {
    auto n = make(NK::For, line);
    n->a.push_back(parse_assign_target(true));
    if (!skip_name("in")) error("expected token 'in', got " + describe(peek()));
    n->a.push_back(parse_tuple(false, false, {"recursive"}));
    n->a.push_back(nullptr);
    if (skip_name("if")) n->a[2] = parse_expression(true);
    if (skip_name("recursive")) error("recursive for loops are not supported");
    expect_block_end();
    std::string end = body_until(&n->body, {"endfor", "else"});
    if (end == "else") {
      expect_block_end();
      body_until(&n->else_body, {"endfor"});
    }
    return n;
  }

  NodeP parse_if(int line) {
    auto n = make(NK::If, line);
    for (;;) {
      n->a.push_back(parse_tuple(false, false));
      expect_block_end();
      n->bodies.emplace_back();
      std::string end = body_until(&n->bodies.back(), {"elif", "else", "endif"});
      if (end == "elif") continue;
      if (end == "else") {
        expect_block_end();
        body_until(&n->else_body, {"endif"});
      }
      return n;
    }
  }

  NodeP parse_set(int line) {
    NodeP target = parse_assign_target(false);
    if (skip_op("=")) {
      auto n = make(NK::Set, line);
      n->a.push_back(std::move(target));
      n->a.push_back(parse_tuple(true, false));
      return n;
    }
    auto n = make(NK::SetBlock, line);
    n->a.push_back(std::move(target));
    n->a.push_back(nullptr);
    if (is_op("|")) n->a[1] = parse_filter_chain(nullptr, false);
    expect_block_end();
    body_until(&n->body, {"endset"});
    return n;
  }

  // A name, `ns.attr` (set only), or a tuple of names.
  NodeP parse_assign_target(bool for_loop) {
    DepthGuard g(this);
    int line = peek().line;
    auto one = [&]() -> NodeP {
      if (skip_op("(")) {
        NodeP t = parse_assign_target(for_loop);
        expect_op(")");
        return t;
      }
      auto n = make(NK::Name, line);
      n->name = expect_name();
      if (!for_loop && is_op(".") && peek(1).type == Tok::Name) {
        next();
        auto a = make(NK::Attr, line);
        a->a.push_back(std::move(n));
        a->name = next().value;
        return a;
      }
      return n;
    };
    NodeP first = one();
    if (!is_op(",")) return first;
    auto tup = make(NK::TupleLit, line);
    tup->a.push_back(std::move(first));
    while (skip_op(",")) {
      if (is_name("in") || is_op("=") || peek().type == Tok::BlockEnd) break;
      tup->a.push_back(one());
    }
    return tup;
  }

  void parse_signature(Node* n) {
    expect_op("(");
    while (!is_op(")")) {
      if (!n->params.empty()) expect_op(",");
      if (is_op(")")) break;
      n->params.push_back(expect_name());
      if (skip_op("="))
        n->a.push_back(parse_expression(true));
      else
        n->a.push_back(nullptr);
    }
    expect_op(")");
  }

  // Comma-separated expressions: one alone is itself, more (or a trailing comma) a tuple.
  NodeP parse_tuple(bool with_condexpr, bool explicit_parens,
                    const std::vector<std::string>& extra_ends = {}) {
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
    auto n = make(NK::TupleLit, line);
    n->a = std::move(items);
    return n;
  }

  NodeP parse_expression(bool with_condexpr) {
    DepthGuard g(this);
    NodeP e = parse_or();
    if (!with_condexpr) return e;
    while (is_name("if")) {
      int line = next().line;
      auto n = make(NK::Cond, line);
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

  NodeP binary(const char* op, NodeP l, NodeP r, int line) {
    auto n = make(NK::Binary, line);
    n->name = op;
    n->a.push_back(std::move(l));
    n->a.push_back(std::move(r));
    return n;
  }

  NodeP parse_or() {
    NodeP l = parse_and();
    while (is_name("or")) {
      int line = next().line;
      l = binary("or", std::move(l), parse_and(), line);
    }
    return l;
  }
  NodeP parse_and() {
    NodeP l = parse_not();
    while (is_name("and")) {
      int line = next().line;
      l = binary("and", std::move(l), parse_not(), line);
    }
    return l;
  }
  NodeP parse_not() {
    DepthGuard g(this);
    if (is_name("not")) {
      auto n = make(NK::Unary, next().line);
      n->name = "not";
      n->a.push_back(parse_not());
      return n;
    }
    return parse_compare();
  }
  NodeP parse_compare() {
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
        cmp = make(NK::Compare, line);
        cmp->a.push_back(std::move(e));
      }
      cmp->ops.push_back(op);
      cmp->a.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(e);
  }
  NodeP parse_math1() {
    NodeP l = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& tok = next();
      std::string op = tok.value;
      l = binary(op == "+" ? "+" : "-", std::move(l), parse_concat(), tok.line);
    }
    return l;
  }
  NodeP parse_concat() {
    NodeP l = parse_math2();
    while (is_op("~")) {
      int line = next().line;
      l = binary("~", std::move(l), parse_math2(), line);
    }
    return l;
  }
  NodeP parse_math2() {
    NodeP l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& tok = next();
      std::string op = tok.value;
      const char* o = op == "*" ? "*" : op == "/" ? "/" : op == "//" ? "//" : "%";
      l = binary(o, std::move(l), parse_pow(), tok.line);
    }
    return l;
  }
  NodeP parse_pow() {
    NodeP l = parse_unary(true);
    while (is_op("**")) {
      int line = next().line;
      l = binary("**", std::move(l), parse_unary(true), line);
    }
    return l;
  }
  NodeP parse_unary(bool with_filter) {
    DepthGuard g(this);
    NodeP n;
    if (is_op("-") || is_op("+")) {
      const Token& tok = next();
      n = make(NK::Unary, tok.line);
      n->name = tok.value;
      n->a.push_back(parse_unary(false));
    } else {
      n = parse_primary();
    }
    n = parse_postfix(std::move(n));
    if (with_filter) n = parse_filter_expr(std::move(n));
    return n;
  }

  NodeP parse_primary() {
    DepthGuard g(this);
    const Token& tok = peek();
    int line = tok.line;
    if (tok.type == Tok::Name) {
      std::string v = next().value;
      auto n = make(NK::Literal, line);
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
      auto n = make(NK::Literal, line);
      n->lit = Value::string(std::move(s));
      return n;
    }
    if (tok.type == Tok::Int || tok.type == Tok::Float) {
      auto n = make(NK::Literal, line);
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
      auto n = make(NK::ListLit, line);
      while (!is_op("]")) {
        if (!n->a.empty()) expect_op(",");
        if (is_op("]")) break;
        n->a.push_back(parse_expression(true));
      }
      expect_op("]");
      return n;
    }
    if (skip_op("{")) {
      auto n = make(NK::DictLit, line);
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

  NodeP parse_postfix(NodeP n) {
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

  NodeP parse_filter_expr(NodeP n) {
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

  NodeP parse_subscript(NodeP obj) {
    DepthGuard g(this);
    const Token& tok = next();
    int line = tok.line;
    if (tok.value == ".") {
      const Token& attr = next();
      if (attr.type == Tok::Name) {
        auto n = make(NK::Attr, line);
        n->name = attr.value;
        n->a.push_back(std::move(obj));
        return n;
      }
      if (attr.type == Tok::Int) {
        auto n = make(NK::Item, line);
        n->a.push_back(std::move(obj));
        auto idx = make(NK::Literal, line);
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
    auto n = make(NK::Item, line);
    n->a.push_back(std::move(obj));
    if (args.size() == 1 && !comma) {
      if (args[0]->kind == NK::Slice && args[0]->a.empty() == false && args[0]->flag) {
        args[0]->a.insert(args[0]->a.begin(), std::move(n->a[0]));
        args[0]->flag = false;
        return std::move(args[0]);
      }
      n->a.push_back(std::move(args[0]));
    } else {
      auto tup = make(NK::TupleLit, line);
      tup->a = std::move(args);
      n->a.push_back(std::move(tup));
    }
    return n;
  }

  // One subscript: an expression or a slice start:stop:step (a Slice node with flag set and
  // a = start, stop, step, each possibly null; the object is inserted first by the caller).
  NodeP parse_subscribed() {
    int line = peek().line;
    NodeP start;
    if (!is_op(":")) {
      start = parse_expression(true);
      if (!is_op(":")) return start;
    }
    next();  // ':'
    auto n = make(NK::Slice, line);
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

  void parse_args(Node* n) {
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

  NodeP parse_call(NodeP fn) {
    DepthGuard g(this);
    auto n = make(NK::Call, peek().line);
    n->a.push_back(std::move(fn));
    parse_args(n.get());
    return n;
  }

  // `|name(args)|name2...` applied to `obj` (null: the {% filter %} / set block input).
  NodeP parse_filter_chain(NodeP obj, bool start_inline) {
    bool first = true;
    while (first ? (start_inline || is_op("|")) : is_op("|")) {
      DepthGuard g(this);
      if (!(first && start_inline)) next();  // '|'
      first = false;
      auto n = make(NK::Filter, peek().line);
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

  NodeP parse_test(NodeP obj) {
    DepthGuard g(this);
    int line = next().line;  // 'is'
    auto n = make(NK::Test, line);
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
};

}  // namespace

Node::~Node() {
  std::vector<NodeP> pending;
  const auto take = [&pending](Node& n) {
    const auto move_all = [&pending](std::vector<NodeP>& v) {
      for (NodeP& c : v) {
        if (c) pending.push_back(std::move(c));
      }
    };
    move_all(n.a);
    move_all(n.body);
    move_all(n.else_body);
    for (auto& b : n.bodies) move_all(b);
    for (auto& kv : n.kw) {
      if (kv.second) pending.push_back(std::move(kv.second));
    }
    if (n.dyn_args) pending.push_back(std::move(n.dyn_args));
    if (n.dyn_kwargs) pending.push_back(std::move(n.dyn_kwargs));
  };
  take(*this);
  while (!pending.empty()) {
    NodeP n = std::move(pending.back());
    pending.pop_back();
    take(*n);  // n is destroyed here with no children left
  }
}

std::vector<NodeP> parse_template(std::vector<Token> tokens, int max_depth) {
  return Parser(std::move(tokens), max_depth).parse_all();
}

}  // namespace geist::jinja
