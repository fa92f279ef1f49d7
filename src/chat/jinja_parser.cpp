// The Jinja parser: Jinja2's grammar into the tree of jinja_ast.h; here the statements (for, if,
// set, macro, call, filter, with, loop controls, ...), the expressions in jinja_parser_expr.cpp.
// Nesting is counted and bounded so that a hostile template cannot overflow the stack.
#include "chat/jinja_parser.h"

#include <cstdlib>

namespace geist::jinja {

NodeP make_node(NK kind, int line) {
  auto n = std::make_unique<Node>();
  n->kind = kind;
  n->line = line;
  return n;
}

// Statements up to a block tag named in `ends` (left unconsumed: the name is next).
std::vector<NodeP> Parser::subparse(const std::vector<std::string>& ends) {
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
      auto n = make_node(NK::Text, tok.line);
      n->name = tok.value;
      body.push_back(std::move(n));
      next();
    } else if (tok.type == Tok::VarBegin) {
      next();
      auto n = make_node(NK::Output, tok.line);
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
std::string Parser::body_until(std::vector<NodeP>* body, const std::vector<std::string>& ends) {
  *body = subparse(ends);
  return next().value;
}

NodeP Parser::parse_statement() {
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
    n = make_node(NK::Macro, line);
    n->name = expect_name();
    parse_signature(n.get());
    expect_block_end();
    body_until(&n->body, {"endmacro"});
  } else if (tag == "call") {
    n = make_node(NK::CallBlock, line);
    n->a.push_back(nullptr);
    if (is_op("(")) parse_signature(n.get());
    NodeP call = parse_expression(true);
    if (call->kind != NK::Call) error("expected call");
    n->a[0] = std::move(call);
    expect_block_end();
    body_until(&n->body, {"endcall"});
  } else if (tag == "filter") {
    n = make_node(NK::FilterBlock, line);
    n->a.push_back(parse_filter_chain(nullptr, true));
    expect_block_end();
    body_until(&n->body, {"endfilter"});
  } else if (tag == "with") {
    n = make_node(NK::With, line);
    while (peek().type != Tok::BlockEnd) {
      if (!n->params.empty()) expect_op(",");
      n->params.push_back(expect_name());
      expect_op("=");
      n->a.push_back(parse_expression(true));
    }
    expect_block_end();
    body_until(&n->body, {"endwith"});
  } else if (tag == "generation") {
    n = make_node(NK::Block, line);
    expect_block_end();
    body_until(&n->body, {"endgeneration"});
  } else if (tag == "break" || tag == "continue") {
    n = make_node(tag == "break" ? NK::Break : NK::Continue, line);
  } else {
    p_--;
    error("Encountered unknown tag '" + tag + "'.");
  }
  expect_block_end();
  return n;
}

NodeP Parser::parse_for(int line) {
  auto n = make_node(NK::For, line);
  n->a.push_back(parse_assign_target(true));
  if (!skip_name("in")) error("expected token 'in', got " + describe(peek()));
  n->a.push_back(parse_tuple(false, false, {"recursive"}));
  n->a.push_back(nullptr);
  if (skip_name("if")) n->a[2] = parse_expression(true);
  n->flag = skip_name("recursive");
  expect_block_end();
  std::string end = body_until(&n->body, {"endfor", "else"});
  if (end == "else") {
    expect_block_end();
    body_until(&n->else_body, {"endfor"});
  }
  return n;
}

NodeP Parser::parse_if(int line) {
  auto n = make_node(NK::If, line);
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

NodeP Parser::parse_set(int line) {
  NodeP target = parse_assign_target(false);
  if (skip_op("=")) {
    auto n = make_node(NK::Set, line);
    n->a.push_back(std::move(target));
    n->a.push_back(parse_tuple(true, false));
    return n;
  }
  auto n = make_node(NK::SetBlock, line);
  n->a.push_back(std::move(target));
  n->a.push_back(nullptr);
  if (is_op("|")) n->a[1] = parse_filter_chain(nullptr, false);
  expect_block_end();
  body_until(&n->body, {"endset"});
  return n;
}

// A name, `ns.attr` (set only), or a tuple of names.
NodeP Parser::parse_assign_target(bool for_loop) {
  DepthGuard g(this);
  int line = peek().line;
  auto one = [&]() -> NodeP {
    if (skip_op("(")) {
      NodeP t = parse_assign_target(for_loop);
      expect_op(")");
      return t;
    }
    auto n = make_node(NK::Name, line);
    n->name = expect_name();
    if (!for_loop && is_op(".") && peek(1).type == Tok::Name) {
      next();
      auto a = make_node(NK::Attr, line);
      a->a.push_back(std::move(n));
      a->name = next().value;
      return a;
    }
    return n;
  };
  NodeP first = one();
  if (!is_op(",")) return first;
  auto tup = make_node(NK::TupleLit, line);
  tup->a.push_back(std::move(first));
  while (skip_op(",")) {
    if (is_name("in") || is_op("=") || peek().type == Tok::BlockEnd) break;
    tup->a.push_back(one());
  }
  return tup;
}

void Parser::parse_signature(Node* n) {
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
