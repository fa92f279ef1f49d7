// Jinja2's built-in filters on strings and numbers (jinja2/filters.py), plus Hugging Face's
// tojson (json.dumps with ensure_ascii=False). The filters on sequences are in
// jinja_filters_seq.cpp, the tests in jinja_tests.cpp.
#include "chat/jinja_filters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "chat/jinja_eval.h"

namespace geist::jinja {
namespace {

double py_round(double x, int64_t nd) {
  if (!std::isfinite(x)) return x;
  if (nd == 0) return std::nearbyint(x);
  if (nd > 300 || nd < -300) return nd > 0 ? x : 0.0;
  if (nd < 0) {
    double p = std::pow(10.0, double(-nd));
    return std::nearbyint(x / p) * p;
  }
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", int(nd), x);
  return std::strtod(buf, nullptr);
}

// Python's int(str): optional sign, digits with single underscores, surrounding whitespace.
bool parse_int(const std::string& s, int64_t base, int64_t* out) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  std::string t;
  for (size_t k = b; k < e; ++k)
    if (s[k] != '_') t += s[k];
  if (t.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(t.c_str(), &end, int(base));
  if (errno || *end) return false;
  *out = v;
  return true;
}

bool parse_float(const std::string& s, double* out) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  std::string t = s.substr(b, e - b);
  if (t.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (*end) return false;
  *out = v;
  return true;
}

std::string indent_str(Evaluator& ev, std::string s, const Value& width, bool first, bool blank) {
  std::string ind;
  if (width.kind == Kind::String) {
    ind = width.str();
  } else {
    int64_t w = width.as_int();
    if (w > int64_t(ev.limits().max_output_bytes)) fail_limit("indent width past max_output_bytes");
    ind = std::string(size_t(std::max<int64_t>(w, 0)), ' ');
  }
  s += "\n";
  // Python's splitlines (\n, \r\n, \r and a few more; the common ones here).
  std::vector<std::string> lines;
  size_t b = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '\n' || s[k] == '\r') {
      lines.push_back(s.substr(b, k - b));
      if (s[k] == '\r' && k + 1 < s.size() && s[k + 1] == '\n') ++k;
      b = k + 1;
    }
  }
  if (b < s.size()) lines.push_back(s.substr(b));
  ev.charge(s.size() + ind.size() * lines.size());
  std::string rv;
  if (blank) {
    for (size_t k = 0; k < lines.size(); ++k) {
      if (k) rv += "\n" + ind;
      rv += lines[k];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t k = 1; k < lines.size(); ++k) {
      rv += "\n";
      if (!lines[k].empty()) rv += ind;
      rv += lines[k];
    }
  }
  if (first) rv = ind + rv;
  return rv;
}

std::string jinja_title(const std::string& s) {
  // Words begin after runs of -, whitespace, (, {, [, <; each word: first upper, rest lower.
  std::string out;
  bool start = true;
  for (char c : s) {
    bool sep = c == '-' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '(' ||
               c == '{' || c == '[' || c == '<' || c == '\f' || c == '\v';
    if (sep) {
      out += c;
      start = true;
    } else if (start) {
      out += (c >= 'a' && c <= 'z') ? char(c - 32) : c;
      start = false;
    } else {
      out += (c >= 'A' && c <= 'Z') ? char(c + 32) : c;
    }
  }
  return out;
}

Value tojson(Evaluator& ev, const Value& v, Args& a) {
  DumpOptions o;
  Value indent = a.get(0, "indent", Value::none());
  a.get(99, "ensure_ascii");
  Value seps = a.get(99, "separators", Value::none());
  Value sort = a.get(99, "sort_keys", Value::boolean(false));
  if (!indent.is_none()) {
    o.has_indent = true;
    if (indent.kind == Kind::String) {
      o.indent = indent.str();
    } else if (indent.kind == Kind::Int || indent.kind == Kind::Bool) {
      int64_t n = indent.as_int();
      if (n > 4096) fail_limit("tojson indent too large");
      o.indent = std::string(size_t(std::max<int64_t>(n, 0)), ' ');
    } else {
      fail("TypeError", "can't multiply sequence by non-int of type '" + type_name(indent) + "'");
    }
    o.item_sep = ",";
  }
  if (!seps.is_none()) {
    std::vector<Value> p = iterate(seps);
    if (p.size() != 2 || !p[0].is_string() || !p[1].is_string())
      fail("ValueError", "separators must be a (item_separator, key_separator) pair");
    o.item_sep = p[0].str();
    o.key_sep = p[1].str();
  }
  o.sort_keys = truthy(sort);
  std::string s = json_dumps(v, o);
  ev.charge(s.size());
  return Value::string(std::move(s));
}

}  // namespace

Value Evaluator::filter(const std::string& name, const Value& v, Args& a) {
  step();
  const std::string& n = name;
  if (std::optional<Value> r = sequence_filter(n, v, a)) return *r;
  if (n == "tojson") return tojson(*this, v, a);
  if (n == "default" || n == "d") {
    Value def = a.get(0, "default_value", Value::string(""));
    bool boolean = truthy(a.get(1, "boolean", Value::boolean(false)));
    if (v.is_undefined() || (boolean && !truthy(v))) return def;
    return v;
  }
  if (n == "length" || n == "count") return Value::integer(length(v));
  if (n == "string") return v.is_string() ? v : Value::string(to_str(v));
  if (n == "safe") return Value::markup(to_str(v));
  if (n == "trim") {
    Value chars = a.get(0, "chars", Value::none());
    Args r;
    r.pos.push_back(chars);
    return call(getattr(string_like(v, to_str(v)), "strip"), r);
  }
  if (n == "upper") return string_like(v, to_upper(to_str(v)));
  if (n == "lower") return string_like(v, to_lower(to_str(v)));
  if (n == "capitalize") {
    std::string t = to_lower(to_str(v));
    if (!t.empty() && t[0] >= 'a' && t[0] <= 'z') t[0] = char(t[0] - 32);
    return Value::string(t);
  }
  if (n == "title") return Value::string(jinja_title(to_str(v)));
  if ((n == "escape" || n == "e") && v.is_markup()) return v;
  if (n == "escape" || n == "e" || n == "forceescape") return Value::markup(html_escape(to_str(v)));
  if (n == "replace") {
    Value s = Value::string(to_str(v));
    Args r;
    r.pos = {Value::string(to_str(a.get(0, "old"))), Value::string(to_str(a.get(1, "new")))};
    Value count = a.get(2, "count", Value::none());
    if (!count.is_none()) r.pos.push_back(count);
    return call(getattr(s, "replace"), r);
  }
  if (n == "abs") {
    if (v.kind == Kind::Int || v.kind == Kind::Bool) {
      if (v.as_int() == INT64_MIN) fail("OverflowError", "integer overflow");
      return Value::integer(std::llabs(v.as_int()));
    }
    if (v.kind == Kind::Float) return Value::number(std::fabs(v.f));
    if (v.is_undefined()) fail_undefined(v);
    fail("TypeError", "bad operand type for abs(): '" + type_name(v) + "'");
  }
  if (n == "round") {
    int64_t prec = a.get(0, "precision", Value::integer(0)).as_int();
    Value method = a.get(1, "method", Value::string("common"));
    if (v.is_undefined()) fail_undefined(v);
    if (!v.is_number())
      fail("TypeError", "type " + type_name(v) + " doesn't define __round__ method");
    std::string m = method.is_string() ? method.str() : "";
    if (m == "common") {
      if (v.kind != Kind::Float) return Value::integer(v.as_int());
      return Value::number(py_round(v.f, prec));
    }
    if (m != "ceil" && m != "floor")
      fail("FilterArgumentError", "method must be common, ceil or floor");
    double p = std::pow(10.0, double(prec));
    double x = v.as_double() * p;
    return Value::number((m == "ceil" ? std::ceil(x) : std::floor(x)) / p);
  }
  if (n == "int") {
    Value def = a.get(0, "default", Value::integer(0));
    int64_t base = a.get(1, "base", Value::integer(10)).as_int();
    if (v.kind == Kind::Int) return v;
    if (v.kind == Kind::Bool) return Value::integer(v.b);
    if (v.kind == Kind::Float) {
      if (!std::isfinite(v.f) || std::fabs(v.f) > 9.2e18) return def;
      return Value::integer(int64_t(v.f));
    }
    if (v.kind == Kind::String) {
      int64_t x;
      if (base >= 2 && base <= 36 && parse_int(v.str(), base, &x)) return Value::integer(x);
      double f;
      if (parse_float(v.str(), &f) && std::isfinite(f) && std::fabs(f) < 9.2e18)
        return Value::integer(int64_t(f));
    }
    return def;
  }
  if (n == "float") {
    Value def = a.get(0, "default", Value::number(0.0));
    if (v.is_number()) return Value::number(v.as_double());
    double f;
    if (v.kind == Kind::String && parse_float(v.str(), &f)) return Value::number(f);
    return def;
  }
  if (n == "indent") {
    Value width = a.get(0, "width", Value::integer(4));
    bool first = truthy(a.get(1, "first", Value::boolean(false)));
    bool blank = truthy(a.get(2, "blank", Value::boolean(false)));
    return string_like(v, indent_str(*this, to_str(v), width, first, blank));
  }
  if (n == "wordcount") {
    const std::string s = to_str(v);
    int64_t count = 0;
    bool in = false;
    for (unsigned char c : s) {
      bool w = std::isalnum(c) || c == '_' || c >= 0x80;
      if (w && !in) ++count;
      in = w;
    }
    return Value::integer(count);
  }
  if (n == "truncate") {
    std::string s = to_str(v);
    int64_t len = a.get(0, "length", Value::integer(255)).as_int();
    bool kill = truthy(a.get(1, "killwords", Value::boolean(false)));
    std::string end = to_str(a.get(2, "end", Value::string("...")));
    Value lw = a.get(3, "leeway", Value::none());
    int64_t leeway = lw.is_none() ? 5 : lw.as_int();
    auto cp = code_points(s);
    int64_t n_cp = int64_t(cp.size()) - 1;
    int64_t n_end = int64_t(code_points(end).size()) - 1;
    if (len < n_end)
      fail("AssertionError",
           "expected length >= " + std::to_string(n_end) + ", got " + std::to_string(len));
    if (n_cp <= len + leeway) return Value::string(s);
    std::string head = s.substr(0, cp[size_t(len - n_end)]);
    if (kill) return Value::string(head + end);
    size_t sp = head.rfind(' ');
    if (sp != std::string::npos) head.resize(sp);
    return Value::string(head + end);
  }
  if (n == "center") {
    std::string s = to_str(v);
    int64_t width = a.get(0, "width", Value::integer(80)).as_int();
    int64_t len = int64_t(code_points(s).size()) - 1;
    if (width <= len) return Value::string(s);
    charge(size_t(width));
    int64_t marg = width - len;
    int64_t left = marg / 2 + (marg & width & 1);
    return Value::string(std::string(size_t(left), ' ') + s +
                         std::string(size_t(marg - left), ' '));
  }
  if (n == "format") {
    if (!a.kw.empty() && !a.pos.empty()) {
      fail("FilterArgumentError", "can't handle positional and keyword arguments at the same time");
    }
    if (!a.kw.empty()) {
      Value d = Value::dict();
      for (auto& kv : a.kw) d.dct().set(Value::string(kv.first), kv.second);
      return Value::string(percent_format(*this, to_str(v), d));
    }
    return Value::string(percent_format(*this, to_str(v), Value::list(a.pos, true)));
  }
  if (n == "attr") {
    Value nm = a.get(0, "name");
    return getattr(v, to_str(nm));
  }
  if (n == "pprint") return Value::string(repr(v));
  if (n == "striptags") {
    std::string s = to_str(v), out;
    bool in_tag = false;
    for (char c : s) {
      if (c == '<')
        in_tag = true;
      else if (c == '>')
        in_tag = false;
      else if (!in_tag)
        out += c;
    }
    Args none;
    Value words = call(getattr(Value::string(out), "split"), none);
    Args sep;
    sep.pos.push_back(words);
    return call(getattr(Value::string(" "), "join"), sep);
  }
  fail("TemplateRuntimeError", "No filter named '" + name + "' found.");
}

}  // namespace geist::jinja
