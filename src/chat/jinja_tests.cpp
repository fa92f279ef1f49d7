// Jinja2's built-in tests (jinja2/tests.py).
#include "chat/jinja_eval.h"

namespace geist::jinja {

bool Evaluator::test(const std::string& name, const Value& v, Args& a) {
  step();
  const std::string& n = name;
  if (n == "defined") return !v.is_undefined();
  if (n == "undefined") return v.is_undefined();
  if (n == "none") return v.is_none();
  if (n == "boolean") return v.kind == Kind::Bool;
  if (n == "true") return v.kind == Kind::Bool && v.b;
  if (n == "false") return v.kind == Kind::Bool && !v.b;
  if (n == "integer") return v.kind == Kind::Int;
  if (n == "float") return v.kind == Kind::Float;
  if (n == "number") return v.is_number();
  if (n == "string") return v.is_string();
  if (n == "mapping") return v.kind == Kind::Dict && !v.dct().is_namespace && !v.dct().is_loop;
  if (n == "iterable")
    return v.is_undefined() || v.is_string() || v.kind == Kind::List ||
           (v.kind == Kind::Dict && !v.dct().is_namespace);
  if (n == "sequence")
    return v.is_string() || (v.kind == Kind::List && !v.lst().generator) ||
           (v.kind == Kind::Dict && !v.dct().is_namespace && !v.dct().is_loop);
  if (n == "callable") return v.kind == Kind::Func;
  if (n == "escaped") return false;
  if (n == "sameas") {
    Value o = a.get(0, "other");
    if (v.kind != o.kind) return false;
    switch (v.kind) {
      case Kind::None:
      case Kind::Undefined:
        return v.obj == o.obj || v.kind == Kind::None;
      case Kind::Bool:
        return v.b == o.b;
      case Kind::Int:
        return v.i == o.i && v.i >= -5 && v.i <= 256;
      case Kind::Float:
        return false;
      default:
        return v.obj == o.obj;
    }
  }
  if (n == "in") return contains(a.get(0, "seq"), v);
  if (n == "eq" || n == "equalto" || n == "==") return equals(v, a.get(0, "other"));
  if (n == "ne" || n == "!=") return !equals(v, a.get(0, "other"));
  if (n == "lt" || n == "lessthan" || n == "<") return less(v, a.get(0, "other"), "<");
  if (n == "gt" || n == "greaterthan" || n == ">") return less(a.get(0, "other"), v, ">");
  if (n == "le" || n == "<=") return !less(a.get(0, "other"), v, "<=");
  if (n == "ge" || n == ">=") return !less(v, a.get(0, "other"), ">=");
  if (n == "odd" || n == "even" || n == "divisibleby") {
    Value d = n == "divisibleby" ? a.get(0, "num") : Value::integer(2);
    Value m = binary_op(*this, "%", v, d);
    if (n == "odd") return equals(m, Value::integer(1));
    return equals(m, Value::integer(0));
  }
  if (n == "lower" || n == "upper") {
    std::string s = to_str(v);
    Value r = call(getattr(Value::string(s), n == "lower" ? "islower" : "isupper"), a);
    return truthy(r);
  }
  if (n == "filter" || n == "test") return false;
  fail("TemplateRuntimeError", "No test named '" + name + "' found.");
}

}  // namespace geist::jinja
