// Jinja2's built-in filters and tests (jinja2/filters.py, jinja2/tests.py), plus Hugging Face's
// tojson (json.dumps with ensure_ascii=False). Filters that return generators in Jinja2 (map,
// select, reject, selectattr, rejectattr, unique, items, batch) return a list marked as a
// generator, so that tojson refuses them as Python does.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "chat/jinja_eval.h"

namespace geist::jinja {
namespace {

Value generator(std::vector<Value> items) {
  Value v = Value::list(std::move(items));
  v.lst().generator = true;
  return v;
}

// Jinja's make_attrgetter: "a.b.0" looked up part by part with getitem.
Value get_attr_path(Evaluator& ev, Value item, const Value& attr) {
  if (attr.kind != Kind::String) return ev.getitem(item, attr);
  const std::string& path = attr.str();
  size_t b = 0;
  for (;;) {
    size_t e = path.find('.', b);
    std::string part = path.substr(b, e == std::string::npos ? std::string::npos : e - b);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                               [](char c) { return c >= '0' && c <= '9'; });
    Value key =
        digits && part.size() < 18 ? Value::integer(std::atoll(part.c_str())) : Value::string(part);
    item = ev.getitem(item, key);
    if (e == std::string::npos) return item;
    b = e + 1;
  }
}

Value lowered(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.kind == Kind::String) return Value::string(to_lower(v.str()));
  return v;
}

std::vector<Value> sorted(Evaluator& ev, std::vector<Value> items, bool reverse, bool cs,
                          const Value& attr) {
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& it : items) {
    Value k = attr.is_none() || attr.is_undefined() ? it : get_attr_path(ev, it, attr);
    keyed.emplace_back(lowered(k, cs), it);
  }
  ev.step(keyed.size() * 4);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? less(y.first, x.first) : less(x.first, y.first);
  });
  std::vector<Value> out;
  for (auto& kv : keyed) out.push_back(kv.second);
  return out;
}

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

Value map_filter(Evaluator& ev, const Value& v, Args& a) {
  std::vector<Value> items =
      truthy(v) ? iterate(v) : std::vector<Value>{};  // as Jinja2: `if value:`
  std::vector<Value> out;
  if (a.has(99, "attribute")) {
    Value attr = a.get(99, "attribute");
    Value def = a.get(99, "default");
    bool has_def = !def.is_undefined() || def.obj;
    for (auto& it : items) {
      Value x = get_attr_path(ev, it, attr);
      if (x.is_undefined() && has_def) x = def;
      out.push_back(x);
    }
    return generator(std::move(out));
  }
  if (a.pos.empty()) return generator(std::move(items));
  Value name = a.pos[0];
  if (name.kind != Kind::String) fail("FilterArgumentError", "map requires a filter argument");
  Args rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (auto& it : items) {
    Args copy = rest;
    out.push_back(ev.filter(name.str(), it, copy));
  }
  return generator(std::move(out));
}

Value select_filter(Evaluator& ev, const Value& v, Args& a, bool attr_mode, bool keep_if) {
  std::vector<Value> items =
      truthy(v) ? iterate(v) : std::vector<Value>{};  // as Jinja2: `if value:`
  size_t off = 0;
  Value attr;
  if (attr_mode) {
    if (a.pos.empty()) fail("TypeError", "missing required argument 'attribute'");
    attr = a.pos[0];
    off = 1;
  }
  std::string test_name;
  Args rest;
  if (a.pos.size() > off) {
    if (a.pos[off].kind != Kind::String) fail("TypeError", "test name must be a string");
    test_name = a.pos[off].str();
    rest.pos.assign(a.pos.begin() + long(off) + 1, a.pos.end());
  }
  rest.kw = a.kw;
  std::vector<Value> out;
  for (auto& it : items) {
    Value x = attr_mode ? get_attr_path(ev, it, attr) : it;
    bool r;
    if (test_name.empty()) {
      r = truthy(x);
    } else {
      Args copy = rest;
      r = ev.test(test_name, x, copy);
    }
    if (r == keep_if) out.push_back(it);
  }
  return generator(std::move(out));
}

}  // namespace

Value Evaluator::filter(const std::string& name, const Value& v, Args& a) {
  step();
  const std::string& n = name;
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
  if (n == "join") {
    Value d = a.get(0, "d", Value::string(""));
    Value attr = a.get(1, "attribute", Value::none());
    std::vector<Value> items = iterate(v);
    std::string sep = to_str(d), out;
    for (size_t k = 0; k < items.size(); ++k) {
      if (k) out += sep;
      out += to_str(attr.is_none() ? items[k] : get_attr_path(*this, items[k], attr));
      charge(out.size());
    }
    return Value::string(std::move(out));
  }
  if (n == "first") {
    std::vector<Value> items = iterate(v);
    if (items.empty()) return Value::undefined("No first item, sequence was empty.");
    return items[0];
  }
  if (n == "last") {
    if (v.kind == Kind::List && v.lst().generator)
      fail("TypeError", "'generator' object is not reversible");
    std::vector<Value> items = iterate(v);
    if (items.empty()) return Value::undefined("No last item, sequence was empty.");
    return items.back();
  }
  if (n == "list") return Value::list(iterate(v));
  if (n == "items") {
    if (v.is_undefined()) return generator({});
    if (v.kind != Kind::Dict || v.dct().is_namespace || v.dct().is_loop)
      fail("TypeError", "Can only get item pairs from a mapping.");
    std::vector<Value> out;
    for (const auto& kv : v.dct().items) out.push_back(Value::list({kv.first, kv.second}, true));
    return generator(std::move(out));
  }
  if (n == "dictsort") {
    bool cs = truthy(a.get(0, "case_sensitive", Value::boolean(false)));
    Value by = a.get(1, "by", Value::string("key"));
    bool rev = truthy(a.get(2, "reverse", Value::boolean(false)));
    if (v.kind != Kind::Dict) fail("TypeError", "dictsort: mapping expected");
    int pos = by.is_string() && by.str() == "value" ? 1 : 0;
    if (!by.is_string() || (by.str() != "key" && by.str() != "value"))
      fail("FilterArgumentError", "You can only sort by either \"key\" or \"value\"");
    std::vector<std::pair<Value, Value>> items = v.dct().items;
    std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
      const Value& kx = pos ? x.second : x.first;
      const Value& ky = pos ? y.second : y.first;
      return rev ? less(lowered(ky, cs), lowered(kx, cs)) : less(lowered(kx, cs), lowered(ky, cs));
    });
    std::vector<Value> out;
    for (auto& kv : items) out.push_back(Value::list({kv.first, kv.second}, true));
    return Value::list(std::move(out));
  }
  if (n == "map") return map_filter(*this, v, a);
  if (n == "select") return select_filter(*this, v, a, false, true);
  if (n == "reject") return select_filter(*this, v, a, false, false);
  if (n == "selectattr") return select_filter(*this, v, a, true, true);
  if (n == "rejectattr") return select_filter(*this, v, a, true, false);
  if (n == "unique") {
    bool cs = truthy(a.get(0, "case_sensitive", Value::boolean(false)));
    Value attr = a.get(1, "attribute", Value::none());
    std::vector<Value> seen, out;
    for (auto& it : iterate(v)) {
      Value k = lowered(attr.is_none() ? it : get_attr_path(*this, it, attr), cs);
      bool dup = false;
      for (auto& s : seen) {
        step();
        if (equals(s, k)) dup = true;
      }
      if (!dup) {
        seen.push_back(k);
        out.push_back(it);
      }
    }
    return generator(std::move(out));
  }
  if (n == "sort") {
    bool rev = truthy(a.get(0, "reverse", Value::boolean(false)));
    bool cs = truthy(a.get(1, "case_sensitive", Value::boolean(false)));
    Value attr = a.get(2, "attribute", Value::none());
    return Value::list(sorted(*this, iterate(v), rev, cs, attr));
  }
  if (n == "reverse") {
    if (v.kind == Kind::String) {
      auto cp = code_points(v.str());
      std::string out;
      for (size_t k = cp.size() - 1; k-- > 0;) out.append(v.str(), cp[k], cp[k + 1] - cp[k]);
      return Value::string(std::move(out));
    }
    std::vector<Value> items = iterate(v);
    std::reverse(items.begin(), items.end());
    return generator(std::move(items));
  }
  if (n == "min" || n == "max") {
    bool cs = truthy(a.get(0, "case_sensitive", Value::boolean(false)));
    Value attr = a.get(1, "attribute", Value::none());
    std::vector<Value> items = iterate(v);
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    size_t best = 0;
    auto key = [&](size_t k) {
      return lowered(attr.is_none() ? items[k] : get_attr_path(*this, items[k], attr), cs);
    };
    for (size_t k = 1; k < items.size(); ++k) {
      step();
      if (n == "min" ? less(key(k), key(best)) : less(key(best), key(k))) best = k;
    }
    return items[best];
  }
  if (n == "sum") {
    Value attr = a.get(0, "attribute", Value::none());
    Value total = a.get(1, "start", Value::integer(0));
    for (auto& it : iterate(v))
      total = binary_op(*this, "+", total, attr.is_none() ? it : get_attr_path(*this, it, attr));
    return total;
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
    if (!a.kw.empty()) {
      Value d = Value::dict();
      for (auto& kv : a.kw) d.dct().set(Value::string(kv.first), kv.second);
      return Value::string(percent_format(*this, to_str(v), d));
    }
    return Value::string(percent_format(*this, to_str(v), Value::list(a.pos, true)));
  }
  if (n == "batch") {
    int64_t count = a.get(0, "linecount").as_int();
    Value fill = a.get(1, "fill_with", Value::none());
    bool has_fill = a.has(1, "fill_with") || !fill.is_none();
    if (count <= 0) fail("ValueError", "batch size must be positive");
    std::vector<Value> items = iterate(v), out, cur;
    for (auto& it : items) {
      cur.push_back(it);
      if (int64_t(cur.size()) == count) {
        out.push_back(Value::list(std::move(cur)));
        cur.clear();
      }
    }
    if (!cur.empty()) {
      if (has_fill)
        while (int64_t(cur.size()) < count) cur.push_back(fill);
      out.push_back(Value::list(std::move(cur)));
    }
    return generator(std::move(out));
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
