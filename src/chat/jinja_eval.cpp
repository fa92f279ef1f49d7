// The Jinja evaluator's core: limits, scoping, statements, macros. Loops are in jinja_loop.cpp,
// expressions (calls, attribute and item access, slicing, operators) in jinja_eval_expr.cpp.
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
  return capture_fn([&] { exec(body); });
}

std::string Evaluator::capture_fn(const std::function<void()>& run) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  try {
    run();
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

}  // namespace geist::jinja
