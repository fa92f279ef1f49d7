// The Jinja evaluator's for loops: the `loop` object (Jinja2's LoopContext: index, length,
// previtem, cycle, changed, depth, ...), loop filters, else blocks, loop controls and
// recursive loops (`{% for x in xs recursive %}... {{ loop(x.children) }}`).
#include "chat/jinja_eval.h"

namespace geist::jinja {
namespace {

Value make_loop(const std::shared_ptr<const std::vector<Value>>& seq, size_t k, const Object& shape,
                int depth, const std::shared_ptr<LoopState>& state) {
  Value loop;
  loop.kind = Kind::Dict;
  auto o = std::make_shared<LoopObj>();
  o->is_loop = true;
  o->seq = seq;
  o->index = k;
  o->depth = shape.depth;
  o->has_ns = shape.has_ns;
  o->loop_depth = depth;
  o->state = state;
  loop.obj = std::move(o);
  return loop;
}

// Whether v holds a loop object (keeping one in loop.changed's state would be a cycle).
bool reaches_loop(const Value& v, int depth = 0) {
  if (depth > int(kMaxNesting) + 1) return false;
  if (v.kind == Kind::List) {
    for (const Value& x : v.lst().items) {
      if (reaches_loop(x, depth + 1)) return true;
    }
  } else if (v.kind == Kind::Dict) {
    if (v.dct().is_loop) return true;
    for (const auto& kv : v.dct().items) {
      if (reaches_loop(kv.first, depth + 1) || reaches_loop(kv.second, depth + 1)) return true;
    }
  }
  return false;
}

}  // namespace

Value loop_attribute(const LoopObj& l, const std::string& name) {
  const auto& items = *l.seq;
  int64_t len = int64_t(items.size());
  int64_t i = int64_t(l.index);
  if (name == "index0") return Value::integer(i);
  if (name == "index") return Value::integer(i + 1);
  if (name == "revindex") return Value::integer(len - i);
  if (name == "revindex0") return Value::integer(len - i - 1);
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i == len - 1);
  if (name == "length") return Value::integer(len);
  if (name == "depth") return Value::integer(l.loop_depth);
  if (name == "depth0") return Value::integer(l.loop_depth - 1);
  if (name == "previtem")
    return i > 0 ? items[size_t(i - 1)] : Value::undefined("there is no previous item");
  if (name == "nextitem")
    return i + 1 < len ? items[size_t(i + 1)] : Value::undefined("there is no next item");
  if (name == "cycle")
    return Value::func("cycle", [i](Evaluator&, Args& a) -> Value {
      if (a.pos.empty()) fail("TypeError", "no items for cycling given");
      return a.pos[size_t(i) % a.pos.size()];
    });
  if (name == "changed") {
    // True when the arguments differ from those of the previous call in this loop.
    return Value::func("changed", [state = l.state](Evaluator&, Args& a) -> Value {
      Value now = Value::list(a.pos, true);
      if (state->has_last && equals(state->last, now)) return Value::boolean(false);
      if (reaches_loop(now)) fail("TypeError", "loop.changed() cannot compare a loop object");
      state->has_last = true;
      state->last = std::move(now);
      return Value::boolean(true);
    });
  }
  return Value::undefined("'jinja2.runtime.LoopContext object' has no attribute '" + name + "'");
}

Value Evaluator::call_loop(const Value& loop, Args& args) {
  const LoopObj& l = static_cast<const LoopObj&>(loop.dct());
  if (!l.state || !l.state->recurse) {
    fail("TypeError",
         "Tried to call non recursive loop. Maybe you forgot the 'recursive' modifier.");
  }
  step();
  NativeFn f = l.state->recurse;
  return f(*this, args);
}

void Evaluator::exec_for(const Node& n) { run_loop(n, eval(*n.a[1]), 1); }

void Evaluator::run_loop(const Node& n, const Value& iterable, int depth) {
  std::vector<Value> all = iterate(iterable);
  std::vector<Value> items;
  if (n.a[2]) {
    for (auto& v : all) {
      step();
      frames_.emplace_back();
      bool keep;
      try {
        assign_target(*n.a[0], v);
        keep = truthy(eval(*n.a[2]));
      } catch (...) {
        frames_.pop_back();
        throw;
      }
      frames_.pop_back();
      if (keep) items.push_back(v);
    }
  } else {
    items = std::move(all);
  }
  auto seq = std::make_shared<const std::vector<Value>>(std::move(items));
  Object shape;  // depth and has_ns of every `loop` of this loop, computed once
  for (const auto& x : *seq) note_child(shape, x);
  auto state = std::make_shared<LoopState>();
  if (n.flag) {
    // loop(xs): the same loop over xs, one level deeper, rendered where it is called.
    const Node* node = &n;
    state->recurse = [node, depth](Evaluator& ev, Args& a) -> Value {
      if (a.pos.size() != 1 || !a.kw.empty())
        fail("TypeError", "loop() takes exactly one argument");
      DepthGuard guard(&ev);
      return Value::string(ev.capture_fn([&] { ev.run_loop(*node, a.pos[0], depth + 1); }));
    };
  }
  for (size_t k = 0; k < seq->size(); ++k) {
    step();
    frames_.emplace_back();
    try {
      frames_.back().vars.emplace_back("loop", make_loop(seq, k, shape, depth, state));
      assign_target(*n.a[0], (*seq)[k]);
      exec(n.body);
    } catch (...) {
      frames_.pop_back();
      throw;
    }
    frames_.pop_back();
    continue_ = false;
    if (break_) {
      break_ = false;
      break;
    }
  }
  if (seq->empty()) exec(n.else_body);
}

}  // namespace geist::jinja
