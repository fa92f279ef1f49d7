// The Jinja evaluator: walks the syntax tree with Jinja2's scoping (a frame per for-loop
// iteration and macro call; `set` binds in the innermost frame), Python's operators and the
// sandbox's attribute rules, and counts every step against Limits. Internal to src/chat.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_ast.h"

namespace geist::jinja {

// Arguments of a call: positional, then keyword (in call order).
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // The argument at position `idx` or named `name` (consumed); `def` when neither was given.
  Value get(size_t idx, const char* name, Value def = Value());
  bool has(size_t idx, const char* name) const;
};

class Evaluator {
 public:
  Evaluator(const RenderOptions& opts, std::string* out);

  void render(const std::vector<NodeP>& body, const Json& context);

  Value eval(const Node& n);
  void exec(const std::vector<NodeP>& body);

  // Limits: one evaluation step (and, now and then, the clock); a string or list about to be
  // built with `bytes` bytes.
  void step(uint64_t n = 1);
  void charge(size_t bytes);
  const Limits& limits() const { return opts_.limits; }
  const RenderOptions& options() const { return opts_; }

  Value call(const Value& fn, Args& args);
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  Value filter(const std::string& name, const Value& v, Args& args);
  // The filters on sequences (jinja_filters_seq.cpp); nullopt when `name` is none of them.
  std::optional<Value> sequence_filter(const std::string& name, const Value& v, Args& args);
  bool test(const std::string& name, const Value& v, Args& args);
  // Python's `item in container`.
  bool contains(const Value& container, const Value& item);
  // Renders `body` into a fresh string (macro bodies, set blocks, filter blocks).
  std::string capture(const std::vector<NodeP>& body);
  // String of `v` for output and `~`.
  std::string output_str(const Value& v) { return to_str(v); }

 private:
  struct Frame {
    std::vector<std::pair<std::string, Value>> vars;
  };
  RenderOptions opts_;
  std::string* out_;
  std::vector<Frame> frames_;
  size_t base_ = 0;  // lowest frame visible from the current macro call (frame 0 always is)
  std::vector<std::pair<std::string, Value>> globals_;
  uint64_t steps_ = 0;
  uint64_t allocated_ = 0;
  int depth_ = 0;
  int max_runtime_depth_;
  bool break_ = false, continue_ = false;
  std::chrono::steady_clock::time_point start_;

  struct DepthGuard {
    Evaluator* e;
    explicit DepthGuard(Evaluator* x);
    ~DepthGuard() { --e->depth_; }
  };

  // What run() writes, as a string.
  std::string capture_fn(const std::function<void()>& run);
  void install_globals();
  Value lookup(const std::string& name);
  void assign(const std::string& name, Value v);
  void assign_target(const Node& target, const Value& v);
  void exec_stmt(const Node& n);
  void exec_for(const Node& n);
  // One for loop over `iterable` (jinja_loop.cpp); depth: loop.depth (recursive calls).
  void run_loop(const Node& n, const Value& iterable, int depth);
  // loop(...) of a recursive loop: the loop's body over the argument, rendered to a string.
  Value call_loop(const Value& loop, Args& args);
  void exec_if(const Node& n);
  void exec_set(const Node& n);
  Value make_macro(const Node& def, bool is_caller);
  Value eval_binary(const Node& n);
  Value eval_compare(const Node& n);
  Value eval_call(const Node& n);
  Value eval_filter(const Node& n, const Value* input);
  Value eval_slice(const Node& n);
  void eval_args(const Node& n, size_t first, Args* args);
  Value apply_filter_chain(const Node* chain, Value input);
};

// loop.<name> (Jinja2's LoopContext), or Undefined.
Value loop_attribute(const LoopObj& loop, const std::string& name);
// Python's binary operators on values (+ - * / // % **), bounded by ev's limits.
Value binary_op(Evaluator& ev, const std::string& op, const Value& a, const Value& b);
// Method `name` bound to `obj` (str, dict, list methods), or Undefined when it has none.
Value method(Evaluator& ev, const Value& obj, const std::string& name);
// Python's printf-style `fmt % args` (jinja_format.cpp).
std::string percent_format(Evaluator& ev, const std::string& fmt, const Value& args);
// Python's str.format(*args, **kwargs) with format specs (jinja_format.cpp).
std::string str_format(Evaluator& ev, const std::string& fmt, Args& args);
// Python's str.upper()/lower() (ASCII letters; other text unchanged).
std::string to_upper(std::string s);
std::string to_lower(std::string s);

}  // namespace geist::jinja
