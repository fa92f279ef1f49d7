// Tokens and the syntax tree of the Jinja engine, and the lexer and parser that build them.
// Internal to src/chat.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace geist::jinja {

enum class Tok : uint8_t {
  Text,        // template data between tags (whitespace control already applied)
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,  // value: the unescaped string
  Int,
  Float,
  Op,  // value: the operator text
  End,
};

struct Token {
  Tok type;
  std::string value;
  int line = 1;
};

// A syntax error: "line L: message" (thrown inside the parser only).
struct SyntaxError {
  int line;
  std::string message;
};

// Splits source into tokens with trim_blocks + lstrip_blocks applied, and drops comments.
// Throws SyntaxError.
std::vector<Token> lex(std::string_view source);

enum class NK : uint8_t {
  // expressions
  Literal,  // lit
  Name,     // name
  Attr,     // a[0].name
  Item,     // a[0][a[1]]
  Slice,    // a[0][a[1]:a[2]:a[3]] (null children allowed)
  Call,     // a[0](a[1..], kw)
  Filter,   // a[0]|name(a[1..], kw); a[0] null in a {% filter %} chain
  Test,     // a[0] is [not] name(a[1..], kw); flag = negated
  Unary,    // name in "-", "+", "not"; a[0]
  Binary,   // name: + - * / // % ** ~ and or; a[0], a[1]
  Compare,  // a[0] then (ops[k], a[k+1])
  Cond,     // a[0] if a[1] else a[2] (a[2] may be null)
  ListLit,  // a
  TupleLit,
  DictLit,  // a: key, value, key, value, ...
  // statements
  Text,         // text
  Output,       // {{ a[0] }}
  If,           // a: conditions; bodies[k]; else in else_body
  For,          // a[0] target, a[1] iterable, a[2] filter condition (or null); body; else_body;
                // flag = recursive
  Set,          // a[0] target, a[1] value
  SetBlock,     // a[0] target, a[1] filter chain (or null); body
  Macro,        // name; params (names), a: defaults aligned to params (null for none); body
  CallBlock,    // a[0] the call; params/a[1..] caller's params/defaults; body
  FilterBlock,  // a[0] filter chain; body
  With,         // params (names), a: values; body
  Break,
  Continue,
  Block,  // body (a plain block: {% generation %})
};

struct Node;
using NodeP = std::unique_ptr<Node>;

struct Node {
  NK kind;
  int line = 0;
  bool flag = false;
  std::string name;
  Value lit;
  std::vector<NodeP> a;
  std::vector<std::string> ops;                   // Compare operators
  std::vector<std::pair<std::string, NodeP>> kw;  // keyword arguments
  std::vector<std::string> params;
  std::vector<std::vector<NodeP>> bodies;  // If: one body per condition
  std::vector<NodeP> body, else_body;
  NodeP dyn_args, dyn_kwargs;  // *args, **kwargs of a call

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  // Iterative: a hostile template's chains (100,000 nots, a long filter chain) would overflow
  // the stack if each node destroyed its children recursively.
  ~Node();
};

// Parses tokens into a list of statements. Throws SyntaxError; throws Error (limit) when the
// nesting exceeds max_depth.
std::vector<NodeP> parse_template(std::vector<Token> tokens, int max_depth);

}  // namespace geist::jinja
