// Python semantics of the Jinja engine's values: truthiness, ==, <, str(), repr(), len(), iter(),
// and json.dumps as Hugging Face's tojson calls it.
#include "chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace geist::jinja {

void fail(const std::string& type, const std::string& message) { throw Error{type, message}; }
void fail_limit(const std::string& message) { throw Error{"LimitError", message, true}; }
void fail_undefined(const Value& v) {
  fail(v.obj ? static_cast<UndefObj*>(v.obj.get())->exc : "UndefinedError", v.undef_hint());
}

const Value* DictObj::find(std::string_view key) const {
  for (const auto& kv : items)
    if (kv.first.kind == Kind::String && kv.first.str() == key) return &kv.second;
  return nullptr;
}
Value* DictObj::find_mut(std::string_view key) {
  for (auto& kv : items)
    if (kv.first.kind == Kind::String && kv.first.str() == key) return &kv.second;
  return nullptr;
}
const Value* DictObj::find(const Value& key) const {
  if (key.kind == Kind::String) return find(std::string_view(key.str()));
  for (const auto& kv : items)
    if (equals(kv.first, key)) return &kv.second;
  return nullptr;
}
void note_child(Object& parent, const Value& child) {
  if (child.kind != Kind::List && child.kind != Kind::Dict) return;
  const Object& c = *child.obj;
  parent.depth = std::max(parent.depth, c.depth + 1);
  parent.has_ns =
      parent.has_ns || c.has_ns || (child.kind == Kind::Dict && child.dct().is_namespace);
  if (parent.depth > kMaxNesting)
    fail("RecursionError", "values nested deeper than " + std::to_string(kMaxNesting) + " levels");
}

bool reaches(const Value& v, const Object* target) {
  if (v.kind == Kind::Func && v.fn().bound) {
    Value self;
    self.kind = v.fn().bound_kind;
    self.obj = v.fn().bound;
    return reaches(self, target);
  }
  if (v.kind != Kind::List && v.kind != Kind::Dict) return false;
  if (v.obj.get() == target) return true;
  if (v.kind == Kind::Dict && v.dct().is_loop) {
    for (const auto& x : *static_cast<const LoopObj*>(v.obj.get())->seq)
      if (reaches(x, target)) return true;
    return false;
  }
  bool ns = v.kind == Kind::Dict && v.dct().is_namespace;
  if (!ns && !v.obj->has_ns) return false;
  if (v.kind == Kind::List) {
    for (const auto& x : v.lst().items)
      if (reaches(x, target)) return true;
    return false;
  }
  for (const auto& kv : v.dct().items)
    if (reaches(kv.second, target)) return true;
  return false;
}

void DictObj::push(Value key, Value v) {
  note_child(*this, v);
  items.emplace_back(std::move(key), std::move(v));
}

void DictObj::set(const Value& key, Value v) {
  note_child(*this, v);
  for (auto& kv : items) {
    if (equals(kv.first, key)) {
      kv.second = std::move(v);
      return;
    }
  }
  items.emplace_back(key, std::move(v));
}

Value Value::string(std::string s) {
  Value v;
  v.kind = Kind::String;
  v.obj = std::make_shared<StrObj>(std::move(s));
  return v;
}
Value Value::markup(std::string s) {
  Value v;
  v.kind = Kind::String;
  v.obj = std::make_shared<StrObj>(std::move(s), true);
  return v;
}
Value string_like(const Value& like, std::string s) {
  return like.is_markup() ? Value::markup(std::move(s)) : Value::string(std::move(s));
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

Value Value::list(std::vector<Value> items, bool tuple) {
  Value v;
  v.kind = Kind::List;
  auto o = std::make_shared<ListObj>();
  o->items = std::move(items);
  o->tuple = tuple;
  for (const auto& x : o->items) note_child(*o, x);
  v.obj = std::move(o);
  return v;
}
Value Value::dict() {
  Value v;
  v.kind = Kind::Dict;
  v.obj = std::make_shared<DictObj>();
  return v;
}
Value Value::func(std::string name, NativeFn fn) {
  Value v;
  v.kind = Kind::Func;
  auto o = std::make_shared<FuncObj>();
  o->name = std::move(name);
  o->fn = std::move(fn);
  v.obj = std::move(o);
  return v;
}
Value Value::undefined(std::string hint, std::string exc) {
  Value v;
  auto o = std::make_shared<UndefObj>();
  o->hint = std::move(hint);
  o->exc = std::move(exc);
  v.obj = std::move(o);
  return v;
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return v.b;
    case Kind::Int:
      return v.i != 0;
    case Kind::Float:
      return v.f != 0.0;
    case Kind::String:
      return !v.str().empty();
    case Kind::List:
      return v.lst().generator || !v.lst().items.empty();
    case Kind::Dict:
      return v.dct().is_namespace || v.dct().is_loop || !v.dct().items.empty();
    case Kind::Func:
      return true;
  }
  return false;
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::Undefined:
    case Kind::None:
      return true;
    case Kind::String:
      return a.str() == b.str();
    case Kind::List: {
      const auto& x = a.lst();
      const auto& y = b.lst();
      if (x.generator || y.generator) return a.obj == b.obj;
      if (x.tuple != y.tuple || x.items.size() != y.items.size()) return false;
      for (size_t k = 0; k < x.items.size(); ++k)
        if (!equals(x.items[k], y.items[k])) return false;
      return true;
    }
    case Kind::Dict: {
      const auto& x = a.dct();
      const auto& y = b.dct();
      if (x.is_namespace || y.is_namespace || x.is_loop || y.is_loop) return a.obj == b.obj;
      if (x.items.size() != y.items.size()) return false;
      for (const auto& kv : x.items) {
        const Value* o = y.find(kv.first);
        if (!o || !equals(kv.second, *o)) return false;
      }
      return true;
    }
    default:
      return a.obj == b.obj;
  }
}

bool less(const Value& a, const Value& b, const char* op) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.kind == Kind::String && b.kind == Kind::String) return a.str() < b.str();
  if (a.kind == Kind::List && b.kind == Kind::List && a.lst().tuple == b.lst().tuple &&
      !a.lst().generator && !b.lst().generator) {
    const auto& x = a.lst().items;
    const auto& y = b.lst().items;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (equals(x[k], y[k])) continue;
      return less(x[k], y[k], op);
    }
    return x.size() < y.size();
  }
  fail("TypeError", std::string("'") + op + "' not supported between instances of '" +
                        type_name(a) + "' and '" + type_name(b) + "'");
}

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "str";
    case Kind::List:
      return v.lst().generator ? "generator" : v.lst().tuple ? "tuple" : "list";
    case Kind::Dict:
      return v.dct().is_namespace ? "Namespace" : v.dct().is_loop ? "LoopContext" : "dict";
    case Kind::Func:
      return "function";
  }
  return "object";
}

std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  std::string t = type_name(v);
  if (t == "Namespace") return "jinja2.utils.Namespace object";
  if (t == "LoopContext") return "jinja2.runtime.LoopContext object";
  if (t == "Undefined") return "jinja2.runtime.Undefined object";
  return t + " object";
}

std::string float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  // sci: [-]d[.ddd]e[+-]XX
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int exp = std::atoi(sci.c_str() + e + 1);
  std::string out = neg ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return out + eb;
  }
  if (exp < 0) return out + "0." + std::string(size_t(-exp - 1), '0') + digits;
  size_t int_len = size_t(exp) + 1;
  if (digits.size() <= int_len)
    return out + digits + std::string(int_len - digits.size(), '0') + ".0";
  return out + digits.substr(0, int_len) + "." + digits.substr(int_len);
}

std::string repr_string(std::string_view s) {
  char q = '\'';
  if (s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos) q = '"';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<unsigned char>(q)) {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += char(c);
    }
  }
  out += q;
  return out;
}

static std::string seq_str(const Value& v) {
  const auto& l = v.lst();
  if (l.generator) return "<generator object at 0x0>";
  std::string out = l.tuple ? "(" : "[";
  for (size_t k = 0; k < l.items.size(); ++k) {
    if (k) out += ", ";
    out += repr(l.items[k]);
  }
  if (l.tuple && l.items.size() == 1) out += ",";
  out += l.tuple ? ")" : "]";
  return out;
}

static std::string dict_str(const Value& v) {
  const auto& d = v.dct();
  std::string out = "{";
  bool first = true;
  for (const auto& kv : d.items) {
    if (!first) out += ", ";
    first = false;
    out += repr(kv.first) + ": " + repr(kv.second);
  }
  out += "}";
  if (d.is_namespace) return "<Namespace " + out + ">";
  if (d.is_loop) return "<LoopContext>";
  return out;
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
      return "";
    case Kind::None:
      return "None";
    case Kind::Bool:
      return v.b ? "True" : "False";
    case Kind::Int:
      return std::to_string(v.i);
    case Kind::Float:
      return float_repr(v.f);
    case Kind::String:
      return v.str();
    case Kind::List:
      return seq_str(v);
    case Kind::Dict:
      return dict_str(v);
    case Kind::Func:
      return "<function " + v.fn().name + ">";
  }
  return "";
}

std::string repr(const Value& v) {
  if (v.kind == Kind::String) return repr_string(v.str());
  if (v.kind == Kind::Undefined) return "Undefined";
  return to_str(v);
}

static Value from_json_at(const Json& j, int depth);
Value from_json(const Json& j) { return from_json_at(j, 0); }

static Value from_json_at(const Json& j, int depth) {
  if (depth > int(kMaxNesting))
    fail("RecursionError",
         "context JSON nested deeper than " + std::to_string(kMaxNesting) + " levels");
  switch (j.type()) {
    case Json::value_t::null:
      return Value::none();
    case Json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case Json::value_t::number_integer:
      return Value::integer(j.get<int64_t>());
    case Json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > uint64_t(INT64_MAX)) return Value::number(double(u));
      return Value::integer(int64_t(u));
    }
    case Json::value_t::number_float:
      return Value::number(j.get<double>());
    case Json::value_t::string:
      return Value::string(j.get<std::string>());
    case Json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json_at(e, depth + 1));
      return Value::list(std::move(items));
    }
    case Json::value_t::object: {
      Value d = Value::dict();
      for (auto it = j.begin(); it != j.end(); ++it)
        d.dct().push(Value::string(it.key()), from_json_at(it.value(), depth + 1));
      return d;
    }
    default:
      return Value::none();
  }
}

std::vector<size_t> code_points(std::string_view s) {
  std::vector<size_t> cp;
  cp.reserve(s.size() + 1);
  for (size_t k = 0; k < s.size(); ++k)
    if ((static_cast<unsigned char>(s[k]) & 0xC0) != 0x80) cp.push_back(k);
  cp.push_back(s.size());
  return cp;
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
      return {};
    case Kind::List:
      return v.lst().items;
    case Kind::Dict: {
      if (v.dct().is_namespace || v.dct().is_loop) break;
      std::vector<Value> keys;
      keys.reserve(v.dct().items.size());
      for (const auto& kv : v.dct().items) keys.push_back(kv.first);
      return keys;
    }
    case Kind::String: {
      const std::string& s = v.str();
      auto cp = code_points(s);
      std::vector<Value> out;
      out.reserve(cp.size());
      for (size_t k = 0; k + 1 < cp.size(); ++k)
        out.push_back(Value::string(s.substr(cp[k], cp[k + 1] - cp[k])));
      return out;
    }
    default:
      break;
  }
  fail("TypeError", "'" + type_name(v) + "' object is not iterable");
}

int64_t length(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
      return 0;
    case Kind::String:
      return int64_t(code_points(v.str()).size() - 1);
    case Kind::List:
      if (v.lst().generator) break;
      return int64_t(v.lst().items.size());
    case Kind::Dict:
      if (v.dct().is_namespace || v.dct().is_loop) break;
      return int64_t(v.dct().items.size());
    default:
      break;
  }
  fail("TypeError", "object of type '" + type_name(v) + "' has no len()");
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

}  // namespace geist::jinja
