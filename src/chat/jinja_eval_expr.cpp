// The Jinja evaluator's expressions: calls, attribute and item access with the sandbox's rules,
// filter chains, slicing, comparisons and operators.
#include <algorithm>
#include <optional>

#include "chat/jinja_eval.h"

namespace geist::jinja {

Value Evaluator::call(const Value& fn, Args& args) {
  if (fn.is_undefined()) fail_undefined(fn);
  if (fn.kind == Kind::Dict && fn.dct().is_loop) return call_loop(fn, args);
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
      if (d.is_loop) return loop_attribute(static_cast<const LoopObj&>(d), name);
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
      if (obj.kind == Kind::List && obj.lst().group && (name == "grouper" || name == "list")) {
        return obj.lst().items[name == "grouper" ? 0 : 1];
      }
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
