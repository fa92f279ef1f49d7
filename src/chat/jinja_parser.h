// The Jinja parser's class, shared by its two halves: statements (jinja_parser.cpp) and
// expressions (jinja_parser_expr.cpp). Internal to src/chat.
#pragma once

#include <string>
#include <vector>

#include "chat/jinja_ast.h"

namespace geist::jinja {

NodeP make_node(NK kind, int line);

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

  std::vector<NodeP> subparse(const std::vector<std::string>& ends);
  std::string body_until(std::vector<NodeP>* body, const std::vector<std::string>& ends);
  NodeP parse_statement();
  NodeP parse_for(int line);
  NodeP parse_if(int line);
  NodeP parse_set(int line);
  NodeP parse_assign_target(bool for_loop);
  void parse_signature(Node* n);
  NodeP parse_tuple(bool with_condexpr, bool explicit_parens,
                    const std::vector<std::string>& extra_ends = {});
  NodeP parse_expression(bool with_condexpr);
  NodeP binary(const char* op, NodeP l, NodeP r, int line);
  NodeP parse_or();
  NodeP parse_and();
  NodeP parse_not();
  NodeP parse_compare();
  NodeP parse_math1();
  NodeP parse_concat();
  NodeP parse_math2();
  NodeP parse_pow();
  NodeP parse_unary(bool with_filter);
  NodeP parse_primary();
  NodeP parse_postfix(NodeP n);
  NodeP parse_filter_expr(NodeP n);
  NodeP parse_subscript(NodeP obj);
  NodeP parse_subscribed();
  void parse_args(Node* n);
  NodeP parse_call(NodeP fn);
  NodeP parse_filter_chain(NodeP obj, bool start_inline);
  NodeP parse_test(NodeP obj);
};

}  // namespace geist::jinja
