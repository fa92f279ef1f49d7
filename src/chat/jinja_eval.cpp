// The Jinja evaluator's core: statements, scoping, macros, loops, attribute and item access.
#include "chat/jinja_eval.h"

#include <algorithm>
#include <optional>

namespace geist::jinja {

Value Args::get(size_t idx, const char* name, Value def) {
  for (auto it = kw.begin(); it != kw.end(); ++it) {
    if (it->first == name) {
      Value v = std::move(it->second);
      kw.erase(it);
      return v;
    }
  }
  if (idx < pos.size()) return pos[idx];
  return def;
}

bool Args::has(size_t idx, const char* name) const {
  if (idx < pos.size()) return true;
  for (const auto& kv : kw)
    if (kv.first == name) return true;
  return false;
}

Evaluator::DepthGuard::DepthGuard(Evaluator* x) : e(x) {
  if (++e->depth_ > e->max_runtime_depth_)
    fail_limit("render nesting deeper than the limit (max_depth " +
               std::to_string(e->opts_.limits.max_depth) + ")");
}

Evaluator::Evaluator(const RenderOptions& opts, std::string* out)
    : opts_(opts), out_(out), start_(std::chrono::steady_clock::now()) {
  max_runtime_depth_ = std::max(opts_.limits.max_depth, 16) * 5;
}

void Evaluator::step(uint64_t n) {
  steps_ += n;
  if (steps_ > opts_.limits.max_steps)
    fail_limit("render took more than max_steps (" + std::to_string(opts_.limits.max_steps) +
               ") steps");
  if ((steps_ & 255) < n || n > 255) {
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (s > opts_.limits.max_seconds)
      fail_limit("render took longer than max_seconds (" +
                 std::to_string(opts_.limits.max_seconds) + " s)");
  }
}

void Evaluator::charge(size_t bytes) {
  if (bytes > opts_.limits.max_output_bytes)
    fail_limit("a string of " + std::to_string(bytes) + " bytes is past max_output_bytes (" +
               std::to_string(opts_.limits.max_output_bytes) + ")");
  allocated_ += bytes;
  if (allocated_ > uint64_t(opts_.limits.max_output_bytes) * 16 + (1u << 20))
    fail_limit("render built more than 16 x max_output_bytes of strings");
  step(1 + bytes / 4096);
}

void Evaluator::render(const std::vector<NodeP>& body, const Json& context) {
  frames_.clear();
  frames_.emplace_back();
  base_ = 0;
  install_globals();
  if (context.is_object()) {
    for (auto it = context.begin(); it != context.end(); ++it) {
      charge(it.value().is_string() ? it.value().get_ref<const std::string&>().size() : 16);
      frames_[0].vars.emplace_back(it.key(), from_json(it.value()));
    }
  }
  exec(body);
}

Value Evaluator::lookup(const std::string& name) {
  for (size_t k = frames_.size(); k-- > base_;) {
    for (auto it = frames_[k].vars.rbegin(); it != frames_[k].vars.rend(); ++it)
      if (it->first == name) return it->second;
  }
  if (base_ > 0) {
    for (auto it = frames_[0].vars.rbegin(); it != frames_[0].vars.rend(); ++it)
      if (it->first == name) return it->second;
  }
  for (const auto& kv : globals_)
    if (kv.first == name) return kv.second;
  return Value::undefined("'" + name + "' is undefined");
}

void Evaluator::assign(const std::string& name, Value v) {
  auto& vars = frames_.back().vars;
  for (auto& kv : vars) {
    if (kv.first == name) {
      kv.second = std::move(v);
      return;
    }
  }
  vars.emplace_back(name, std::move(v));
}

void Evaluator::assign_target(const Node& target, const Value& v) {
  if (target.kind == NK::Name) {
    assign(target.name, v);
    return;
  }
  if (target.kind == NK::Attr) {
    Value ns = eval(*target.a[0]);
    if (ns.kind != Kind::Dict || !ns.dct().is_namespace)
      fail("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
    // A namespace holding itself would be a reference cycle (unbounded str(), a leak).
    if (reaches(v, ns.obj.get())) fail("RecursionError", "cannot assign a namespace into itself");
    ns.dct().set(Value::string(target.name), v);
    return;
  }
  // tuple unpacking
  if (v.is_undefined()) fail_undefined(v);
  std::vector<Value> items = iterate(v);
  size_t want = target.a.size();
  if (items.size() < want)
    fail("ValueError", "not enough values to unpack (expected " + std::to_string(want) + ", got " +
                           std::to_string(items.size()) + ")");
  if (items.size() > want)
    fail("ValueError", "too many values to unpack (expected " + std::to_string(want) + ")");
  for (size_t k = 0; k < want; ++k) assign_target(*target.a[k], items[k]);
}

std::string Evaluator::capture(const std::vector<NodeP>& body) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  try {
    exec(body);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buf;
}

void Evaluator::exec(const std::vector<NodeP>& body) {
  for (const auto& n : body) {
    exec_stmt(*n);
    if (break_ || continue_) return;
  }
}

void Evaluator::exec_stmt(const Node& n) {
  DepthGuard g(this);
  step();
  switch (n.kind) {
    case NK::Text:
      charge(n.name.size());
      out_->append(n.name);
      break;
    case NK::Output: {
      Value v = eval(*n.a[0]);
      if (v.kind == Kind::String) {
        out_->append(v.str());
      } else {
        out_->append(to_str(v));
      }
      break;
    }
    case NK::If:
      exec_if(n);
      break;
    case NK::For:
      exec_for(n);
      break;
    case NK::Set:
    case NK::SetBlock:
      exec_set(n);
      break;
    case NK::Macro:
      assign(n.name, make_macro(n, false));
      break;
    case NK::CallBlock: {
      const Node& call = *n.a[0];
      Value fn = eval(*call.a[0]);
      Args args;
      eval_args(call, 1, &args);
      args.kw.emplace_back("caller", make_macro(n, true));
      Value r = this->call(fn, args);
      out_->append(to_str(r));
      break;
    }
    case NK::FilterBlock: {
      Value v = apply_filter_chain(n.a[0].get(), Value::string(capture(n.body)));
      out_->append(to_str(v));
      break;
    }
    case NK::With: {
      std::vector<Value> vals;
      for (const auto& e : n.a) vals.push_back(eval(*e));
      frames_.emplace_back();
      for (size_t k = 0; k < vals.size(); ++k) assign(n.params[k], vals[k]);
      try {
        exec(n.body);
      } catch (...) {
        frames_.pop_back();
        throw;
      }
      frames_.pop_back();
      break;
    }
    case NK::Block:
      exec(n.body);
      break;
    case NK::Break:
      break_ = true;
      break;
    case NK::Continue:
      continue_ = true;
      break;
    default:
      fail("TemplateRuntimeError", "unexpected node");
  }
  if (out_->size() > opts_.limits.max_output_bytes)
    fail_limit("rendered text is past max_output_bytes (" +
               std::to_string(opts_.limits.max_output_bytes) + ")");
}

void Evaluator::exec_if(const Node& n) {
  for (size_t k = 0; k < n.a.size(); ++k) {
    if (truthy(eval(*n.a[k]))) {
      exec(n.bodies[k]);
      return;
    }
  }
  exec(n.else_body);
}

void Evaluator::exec_set(const Node& n) {
  Value v;
  if (n.kind == NK::Set) {
    v = eval(*n.a[1]);
  } else {
    v = Value::string(capture(n.body));
    if (n.a[1]) v = apply_filter_chain(n.a[1].get(), v);
  }
  assign_target(*n.a[0], v);
}

static Value make_loop(const std::shared_ptr<const std::vector<Value>>& seq, size_t k,
                       const Object& shape) {
  Value loop;
  loop.kind = Kind::Dict;
  auto o = std::make_shared<LoopObj>();
  o->is_loop = true;
  o->seq = seq;
  o->index = k;
  o->depth = shape.depth;
  o->has_ns = shape.has_ns;
  loop.obj = std::move(o);
  return loop;
}

// loop.<name>, computed from the loop's position (Jinja2's LoopContext).
static Value loop_attr(const LoopObj& l, const std::string& name) {
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
  if (name == "depth") return Value::integer(1);
  if (name == "depth0") return Value::integer(0);
  if (name == "previtem")
    return i > 0 ? items[size_t(i - 1)] : Value::undefined("there is no previous item");
  if (name == "nextitem")
    return i + 1 < len ? items[size_t(i + 1)] : Value::undefined("there is no next item");
  if (name == "cycle")
    return Value::func("cycle", [i](Evaluator&, Args& a) -> Value {
      if (a.pos.empty()) fail("TypeError", "no items for cycling given");
      return a.pos[size_t(i) % a.pos.size()];
    });
  return Value::undefined("'jinja2.runtime.LoopContext object' has no attribute '" + name + "'");
}

void Evaluator::exec_for(const Node& n) {
  Value iterable = eval(*n.a[1]);
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
  for (size_t k = 0; k < seq->size(); ++k) {
    step();
    frames_.emplace_back();
    try {
      frames_.back().vars.emplace_back("loop", make_loop(seq, k, shape));
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

Value Evaluator::make_macro(const Node& def, bool is_caller) {
  const Node* d = &def;
  std::string name = is_caller ? "caller" : def.name;
  // The caller of a {% call %} block sees the frames where the block is written.
  size_t caller_top = frames_.size();
  size_t caller_base = base_;
  return Value::func(
      name, [d, name, is_caller, caller_top, caller_base](Evaluator& ev, Args& args) -> Value {
        DepthGuard g(&ev);
        ev.step();
        size_t saved_base = ev.base_;
        bool frames_ok = !is_caller || caller_top <= ev.frames_.size();
        ev.frames_.emplace_back();
        ev.base_ = is_caller && frames_ok ? caller_base : ev.frames_.size() - 1;
        std::string result;
        try {
          size_t np = d->params.size();
          std::vector<Value> extra;
          for (size_t k = 0; k < args.pos.size(); ++k) {
            if (k < np)
              ev.assign(d->params[k], args.pos[k]);
            else
              extra.push_back(args.pos[k]);
          }
          Value kwargs = Value::dict();
          Value caller;
          for (auto& kv : args.kw) {
            auto it = std::find(d->params.begin(), d->params.end(), kv.first);
            if (it != d->params.end()) {
              ev.assign(kv.first, kv.second);
            } else if (kv.first == "caller") {
              caller = kv.second;
            } else {
              kwargs.dct().set(Value::string(kv.first), kv.second);
            }
          }
          for (size_t k = 0; k < np; ++k) {
            bool given = k < args.pos.size();
            for (auto& kv : args.kw)
              if (kv.first == d->params[k]) given = true;
            if (given) continue;
            const Node* def_expr = k < d->a.size() ? d->a[k].get() : nullptr;
            if (is_caller) def_expr = k + 1 < d->a.size() ? d->a[k + 1].get() : nullptr;
            if (def_expr)
              ev.assign(d->params[k], ev.eval(*def_expr));
            else
              ev.assign(d->params[k],
                        Value::undefined("parameter '" + d->params[k] + "' was not provided"));
          }
          ev.assign("varargs", Value::list(std::move(extra), true));
          ev.assign("kwargs", kwargs);
          if (!caller.is_undefined()) ev.assign("caller", caller);
          result = ev.capture(d->body);
        } catch (...) {
          ev.frames_.pop_back();
          ev.base_ = saved_base;
          throw;
        }
        ev.frames_.pop_back();
        ev.base_ = saved_base;
        ev.break_ = ev.continue_ = false;
        return Value::string(std::move(result));
      });
}

Value Evaluator::call(const Value& fn, Args& args) {
  if (fn.is_undefined()) fail_undefined(fn);
  if (fn.kind != Kind::Func) fail("TypeError", "'" + type_name(fn) + "' object is not callable");
  step();
  NativeFn f = fn.fn().fn;  // keep the callable alive while it runs
  return f(*this, args);
}

Value Evaluator::getattr(const Value& obj, const std::string& name) {
  switch (obj.kind) {
    case Kind::Undefined:
      fail_undefined(obj);
    case Kind::Dict: {
      const DictObj& d = obj.dct();
      if (d.is_loop) return loop_attr(static_cast<const LoopObj&>(d), name);
      if (d.is_namespace) {
        if (const Value* v = d.find(name)) return *v;
        break;
      }
      Value m = method(*this, obj, name);
      if (!m.is_undefined() || m.obj) return m;
      if (const Value* v = d.find(name)) return *v;
      break;
    }
    case Kind::String:
    case Kind::List: {
      Value m = method(*this, obj, name);
      if (!m.is_undefined() || m.obj) return m;
      break;
    }
    default:
      break;
  }
  return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + name + "'");
}

Value Evaluator::getitem(const Value& obj, const Value& key) {
  switch (obj.kind) {
    case Kind::Undefined:
      fail_undefined(obj);
    case Kind::Dict: {
      const DictObj& d = obj.dct();
      if (d.is_namespace || d.is_loop) break;
      if (const Value* v = d.find(key)) return *v;
      break;
    }
    case Kind::List:
    case Kind::String: {
      if (obj.kind == Kind::List && obj.lst().generator) break;
      if (key.kind != Kind::Int && key.kind != Kind::Bool) break;
      int64_t i = key.as_int();
      if (obj.kind == Kind::List) {
        int64_t n = int64_t(obj.lst().items.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return obj.lst().items[size_t(i)];
      } else {
        auto cp = code_points(obj.str());
        int64_t n = int64_t(cp.size()) - 1;
        if (i < 0) i += n;
        if (i >= 0 && i < n)
          return Value::string(obj.str().substr(cp[size_t(i)], cp[size_t(i) + 1] - cp[size_t(i)]));
      }
      return Value::undefined(object_type_repr(obj) + " has no element " + repr(key));
    }
    default:
      break;
  }
  if (key.kind == Kind::String) {
    if (key.str().empty() || key.str()[0] != '_') {
      Value v = getattr(obj, key.str());
      return v;
    }
    return Value::undefined("'" + object_type_repr(obj) + "' has no attribute " + repr(key));
  }
  return Value::undefined(object_type_repr(obj) + " has no element " + repr(key));
}

void Evaluator::eval_args(const Node& n, size_t first, Args* args) {
  for (size_t k = first; k < n.a.size(); ++k) args->pos.push_back(eval(*n.a[k]));
  if (n.dyn_args) {
    Value v = eval(*n.dyn_args);
    for (auto& x : iterate(v)) args->pos.push_back(x);
  }
  for (const auto& kv : n.kw) args->kw.emplace_back(kv.first, eval(*kv.second));
  if (n.dyn_kwargs) {
    Value v = eval(*n.dyn_kwargs);
    if (v.kind != Kind::Dict) fail("TypeError", "argument after ** must be a mapping");
    for (auto& kv : v.dct().items)
      if (kv.first.is_string()) args->kw.emplace_back(kv.first.str(), kv.second);
  }
}

Value Evaluator::eval_filter(const Node& n, const Value* input) {
  Value v = n.a[0] ? eval(*n.a[0]) : (input ? *input : Value());
  if (!n.a[0] && n.kind == NK::Filter && n.a.size() == 1 && !input) return v;
  Args args;
  eval_args(n, 1, &args);
  return filter(n.name, v, args);
}

Value Evaluator::apply_filter_chain(const Node* chain, Value input) {
  // The chain is nested Filter nodes whose innermost input (a[0]) is null.
  std::vector<const Node*> nodes;
  for (const Node* f = chain; f; f = f->a[0].get()) nodes.push_back(f);
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Args args;
    eval_args(**it, 1, &args);
    input = filter((*it)->name, input, args);
  }
  return input;
}

static Value slice_seq(Evaluator& ev, const Value& obj, const Value& a, const Value& b,
                       const Value& c) {
  auto idx = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_none() || v.is_undefined()) return std::nullopt;
    if (v.kind != Kind::Int && v.kind != Kind::Bool)
      fail("TypeError", "slice indices must be integers or None or have an __index__ method");
    return v.as_int();
  };
  std::optional<int64_t> start = idx(a, "start"), stop = idx(b, "stop"), stp = idx(c, "step");
  int64_t step = stp.value_or(1);
  if (step == 0) fail("ValueError", "slice step cannot be zero");
  bool is_str = obj.kind == Kind::String;
  std::vector<size_t> cp;
  int64_t n;
  if (is_str) {
    cp = code_points(obj.str());
    n = int64_t(cp.size()) - 1;
  } else if (obj.kind == Kind::List && !obj.lst().generator) {
    n = int64_t(obj.lst().items.size());
  } else {
    if (obj.is_undefined()) fail_undefined(obj);
    fail("TypeError", "'" + type_name(obj) + "' object is not subscriptable");
  }
  auto clamp = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    return x;
  };
  int64_t lo = clamp(start, step < 0 ? n - 1 : 0);
  int64_t hi = clamp(stop, step < 0 ? -1 : n);
  std::vector<int64_t> picks;
  if (step > 0)
    for (int64_t i = lo; i < hi; i += step) picks.push_back(i);
  else
    for (int64_t i = lo; i > hi; i += step) picks.push_back(i);
  ev.step(picks.size() / 16);
  if (is_str) {
    std::string out;
    for (int64_t i : picks)
      out += obj.str().substr(cp[size_t(i)], cp[size_t(i) + 1] - cp[size_t(i)]);
    return Value::string(std::move(out));
  }
  std::vector<Value> out;
  out.reserve(picks.size());
  for (int64_t i : picks) out.push_back(obj.lst().items[size_t(i)]);
  return Value::list(std::move(out), obj.lst().tuple);
}

Value Evaluator::eval_slice(const Node& n) {
  Value obj = eval(*n.a[0]);
  Value a = n.a[1] ? eval(*n.a[1]) : Value::none();
  Value b = n.a[2] ? eval(*n.a[2]) : Value::none();
  Value c = n.a[3] ? eval(*n.a[3]) : Value::none();
  return slice_seq(*this, obj, a, b, c);
}

Value Evaluator::eval_call(const Node& n) {
  const Node& callee = *n.a[0];
  Value fn = eval(callee);
  Args args;
  eval_args(n, 1, &args);
  return call(fn, args);
}

Value Evaluator::eval_compare(const Node& n) {
  Value left = eval(*n.a[0]);
  for (size_t k = 0; k < n.ops.size(); ++k) {
    Value right = eval(*n.a[k + 1]);
    const std::string& op = n.ops[k];
    bool r;
    if (op == "==")
      r = equals(left, right);
    else if (op == "!=")
      r = !equals(left, right);
    else if (op == "<")
      r = less(left, right, "<");
    else if (op == ">")
      r = less(right, left, ">");
    else if (op == "<=")
      r = !less(right, left, "<=");
    else if (op == ">=")
      r = !less(left, right, ">=");
    else if (op == "in")
      r = contains(right, left);
    else
      r = !contains(right, left);
    if (!r) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Evaluator::eval_binary(const Node& n) {
  const std::string& op = n.name;
  if (op == "and") {
    Value l = eval(*n.a[0]);
    return truthy(l) ? eval(*n.a[1]) : l;
  }
  if (op == "or") {
    Value l = eval(*n.a[0]);
    return truthy(l) ? l : eval(*n.a[1]);
  }
  Value l = eval(*n.a[0]);
  Value r = eval(*n.a[1]);
  if (op == "~") {
    std::string s = to_str(l);
    std::string t = to_str(r);
    charge(s.size() + t.size());
    return Value::string(s + t);
  }
  return binary_op(*this, op, l, r);
}

Value Evaluator::eval(const Node& n) {
  DepthGuard g(this);
  step();
  switch (n.kind) {
    case NK::Literal:
      return n.lit;
    case NK::Name:
      return lookup(n.name);
    case NK::Attr:
      return getattr(eval(*n.a[0]), n.name);
    case NK::Item:
      return getitem(eval(*n.a[0]), eval(*n.a[1]));
    case NK::Slice:
      return eval_slice(n);
    case NK::Call:
      return eval_call(n);
    case NK::Filter:
      return eval_filter(n, nullptr);
    case NK::Test: {
      Value v = eval(*n.a[0]);
      Args args;
      eval_args(n, 1, &args);
      bool r = test(n.name, v, args);
      return Value::boolean(n.flag ? !r : r);
    }
    case NK::Unary: {
      Value v = eval(*n.a[0]);
      if (n.name == "not") return Value::boolean(!truthy(v));
      if (v.is_undefined()) fail_undefined(v);
      if (n.name == "-") {
        if (v.kind == Kind::Int || v.kind == Kind::Bool) {
          if (v.as_int() == INT64_MIN) fail("OverflowError", "integer overflow");
          return Value::integer(-v.as_int());
        }
        if (v.kind == Kind::Float) return Value::number(-v.f);
        fail("TypeError", "bad operand type for unary -: '" + type_name(v) + "'");
      }
      if (v.kind == Kind::Bool) return Value::integer(v.b);
      if (!v.is_number()) fail("TypeError", "bad operand type for unary +: '" + type_name(v) + "'");
      return v;
    }
    case NK::Binary:
      return eval_binary(n);
    case NK::Compare:
      return eval_compare(n);
    case NK::Cond: {
      if (truthy(eval(*n.a[1]))) return eval(*n.a[0]);
      if (n.a[2]) return eval(*n.a[2]);
      return Value::undefined("the inline if-expression on line " + std::to_string(n.line) +
                              " evaluated to false and no else section was defined.");
    }
    case NK::ListLit:
    case NK::TupleLit: {
      std::vector<Value> items;
      items.reserve(n.a.size());
      for (const auto& e : n.a) items.push_back(eval(*e));
      return Value::list(std::move(items), n.kind == NK::TupleLit);
    }
    case NK::DictLit: {
      Value d = Value::dict();
      for (size_t k = 0; k + 1 < n.a.size(); k += 2) {
        Value key = eval(*n.a[k]);
        if (key.kind == Kind::List && !key.lst().tuple)
          fail("TypeError", "unhashable type: 'list'");
        if (key.kind == Kind::Dict) fail("TypeError", "unhashable type: 'dict'");
        d.dct().set(key, eval(*n.a[k + 1]));
      }
      return d;
    }
    default:
      fail("TemplateRuntimeError", "unexpected node in expression");
  }
}

}  // namespace geist::jinja
