// Methods of str, dict and list as the immutable sandbox allows them (methods that mutate a
// list or dict are "unsafe": using them raises SecurityError), and the global functions
// (range, namespace, dict, raise_exception, strftime_now, joiner, cycler).
#include <algorithm>
#include <ctime>

#include "chat/jinja_eval.h"

namespace geist::jinja {
namespace {

bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string need_str(const Value& v, const char* what) {
  if (v.kind != Kind::String) {
    if (v.is_undefined()) fail_undefined(v);
    fail("TypeError", std::string(what) + " arg must be None or str");
  }
  return v.str();
}

std::string strip_chars(const std::string& s, const Value& chars, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (chars.is_none() || chars.is_undefined()) {
    if (left)
      while (b < e && is_ws(s[b])) ++b;
    if (right)
      while (e > b && is_ws(s[e - 1])) --e;
    return s.substr(b, e - b);
  }
  std::string set = need_str(chars, "strip");
  // Work on code points so that multi-byte characters in `chars` strip as units.
  auto cps = code_points(s);
  auto set_cps = code_points(set);
  auto in_set = [&](size_t k) {
    std::string_view ch(s.data() + cps[k], cps[k + 1] - cps[k]);
    for (size_t j = 0; j + 1 < set_cps.size(); ++j)
      if (std::string_view(set.data() + set_cps[j], set_cps[j + 1] - set_cps[j]) == ch) return true;
    return false;
  };
  size_t lo = 0, hi = cps.size() - 1;
  if (left)
    while (lo < hi && in_set(lo)) ++lo;
  if (right)
    while (hi > lo && in_set(hi - 1)) --hi;
  return s.substr(cps[lo], cps[hi] - cps[lo]);
}

Value split(Evaluator& ev, const std::string& s, const Value& sepv, int64_t maxsplit,
            bool from_right) {
  std::vector<std::string> parts;
  if (sepv.is_none() || sepv.is_undefined()) {
    // whitespace split: runs of whitespace, no empty strings
    std::vector<std::pair<size_t, size_t>> words;
    size_t k = 0;
    while (k < s.size()) {
      while (k < s.size() && is_ws(s[k])) ++k;
      if (k >= s.size()) break;
      size_t b = k;
      while (k < s.size() && !is_ws(s[k])) ++k;
      words.emplace_back(b, k);
    }
    if (maxsplit < 0 || size_t(maxsplit) + 1 >= words.size()) {
      for (auto& w : words) parts.push_back(s.substr(w.first, w.second - w.first));
    } else if (!from_right) {
      for (size_t j = 0; j < size_t(maxsplit); ++j)
        parts.push_back(s.substr(words[j].first, words[j].second - words[j].first));
      size_t b = words[size_t(maxsplit)].first;
      size_t e = s.size();
      while (e > b && is_ws(s[e - 1])) --e;
      parts.push_back(s.substr(b, e - b));
    } else {
      size_t keep = words.size() - size_t(maxsplit);
      size_t b = 0;
      while (b < s.size() && is_ws(s[b])) ++b;
      parts.push_back(s.substr(b, words[keep - 1].second - b));
      for (size_t j = keep; j < words.size(); ++j)
        parts.push_back(s.substr(words[j].first, words[j].second - words[j].first));
    }
  } else {
    std::string sep = need_str(sepv, "split");
    if (sep.empty()) fail("ValueError", "empty separator");
    std::vector<size_t> hits;
    for (size_t p = s.find(sep); p != std::string::npos; p = s.find(sep, p + sep.size()))
      hits.push_back(p);
    if (maxsplit >= 0 && hits.size() > size_t(maxsplit)) {
      if (from_right) {
        // rsplit matches from the end; for non-overlapping separators, take the last ones.
        std::vector<size_t> r;
        size_t end = s.size();
        while (r.size() < size_t(maxsplit)) {
          if (end < sep.size()) break;
          size_t p = s.rfind(sep, end - sep.size());
          if (p == std::string::npos) break;
          r.insert(r.begin(), p);
          if (p == 0) break;
          end = p;
        }
        hits = r;
      } else {
        hits.resize(size_t(maxsplit));
      }
    }
    size_t b = 0;
    for (size_t p : hits) {
      parts.push_back(s.substr(b, p - b));
      b = p + sep.size();
    }
    parts.push_back(s.substr(b));
  }
  ev.step(parts.size());
  std::vector<Value> out;
  out.reserve(parts.size());
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return Value::list(std::move(out));
}

int64_t cp_index(const std::string& s, size_t byte) {
  int64_t n = 0;
  for (size_t k = 0; k < byte && k < s.size(); ++k)
    if ((static_cast<unsigned char>(s[k]) & 0xC0) != 0x80) ++n;
  return n;
}

std::string py_title(const std::string& s) {
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    bool lower = c >= 'a' && c <= 'z', upper = c >= 'A' && c <= 'Z';
    if (lower && !prev_cased)
      c = char(c - 32);
    else if (upper && prev_cased)
      c = char(c + 32);
    prev_cased = lower || upper || (static_cast<unsigned char>(c) >= 0x80 && prev_cased);
  }
  return out;
}

Value bind(const Value& self, const char* name,
           std::function<Value(Evaluator&, const Value&, Args&)> f) {
  Value m = Value::func(name, [self, f](Evaluator& ev, Args& a) { return f(ev, self, a); });
  m.fn().bound = self.obj;
  m.fn().bound_kind = self.kind;
  return m;
}

Value unsafe(const Value& obj, const std::string& name) {
  return Value::undefined(
      "access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe.",
      "SecurityError");
}

Value str_method(Evaluator& ev, const Value& obj, const std::string& name) {
  using A = Args;
  if (name == "startswith" || name == "endswith") {
    bool ends = name == "endswith";
    return bind(obj, name == "startswith" ? "startswith" : "endswith",
                [ends](Evaluator&, const Value& self, A& a) {
                  Value p = a.get(0, "prefix");
                  std::vector<Value> options;
                  if (p.kind == Kind::List && p.lst().tuple)
                    options = p.lst().items;
                  else
                    options.push_back(p);
                  const std::string& s = self.str();
                  for (auto& o : options) {
                    if (o.kind != Kind::String)
                      fail("TypeError", std::string(ends ? "endswith" : "startswith") +
                                            " first arg must be str or a tuple of str, not " +
                                            type_name(o));
                    const std::string& x = o.str();
                    if (x.size() > s.size()) continue;
                    if (ends ? s.compare(s.size() - x.size(), x.size(), x) == 0
                             : s.compare(0, x.size(), x) == 0)
                      return Value::boolean(true);
                  }
                  return Value::boolean(false);
                });
  }
  if (name == "split" || name == "rsplit") {
    bool right = name == "rsplit";
    return bind(obj, "split", [right](Evaluator& ev, const Value& self, A& a) {
      Value sep = a.get(0, "sep", Value::none());
      Value maxv = a.get(1, "maxsplit", Value::integer(-1));
      return split(ev, self.str(), sep, maxv.as_int(), right);
    });
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    bool l = name != "rstrip", r = name != "lstrip";
    return bind(obj, "strip", [l, r](Evaluator&, const Value& self, A& a) {
      return string_like(self, strip_chars(self.str(), a.get(0, "chars", Value::none()), l, r));
    });
  }
  if (name == "replace") {
    return bind(obj, "replace", [](Evaluator& ev, const Value& self, A& a) {
      std::string from = need_str(a.get(0, "old"), "replace");
      std::string to = need_str(a.get(1, "new"), "replace");
      int64_t count = a.get(2, "count", Value::integer(-1)).as_int();
      const std::string& s = self.str();
      std::string out;
      if (from.empty()) {
        auto cps = code_points(s);
        int64_t done = 0;
        for (size_t k = 0; k + 1 < cps.size(); ++k) {
          if (count < 0 || done < count) {
            out += to;
            ++done;
          }
          out.append(s, cps[k], cps[k + 1] - cps[k]);
          ev.charge(out.size());
        }
        if (count < 0 || done < count) out += to;
        return Value::string(std::move(out));
      }
      size_t b = 0;
      int64_t done = 0;
      for (size_t p = s.find(from); p != std::string::npos && (count < 0 || done < count);
           p = s.find(from, b)) {
        out.append(s, b, p - b);
        out += to;
        b = p + from.size();
        ++done;
        ev.charge(out.size());
      }
      out.append(s, b, std::string::npos);
      ev.charge(out.size());
      return Value::string(std::move(out));
    });
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" ||
      name == "swapcase") {
    std::string n = name;
    return bind(obj, "case", [n](Evaluator&, const Value& self, A&) {
      const std::string& s = self.str();
      if (n == "upper") return string_like(self, to_upper(s));
      if (n == "lower") return string_like(self, to_lower(s));
      if (n == "title") return Value::string(py_title(s));
      if (n == "capitalize") {
        std::string t = to_lower(s);
        if (!t.empty() && t[0] >= 'a' && t[0] <= 'z') t[0] = char(t[0] - 32);
        return Value::string(t);
      }
      std::string t = s;
      for (char& c : t) {
        if (c >= 'a' && c <= 'z')
          c = char(c - 32);
        else if (c >= 'A' && c <= 'Z')
          c = char(c + 32);
      }
      return Value::string(t);
    });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    std::string n = name;
    return bind(obj, "find", [n](Evaluator&, const Value& self, A& a) {
      std::string sub = need_str(a.get(0, "sub"), n.c_str());
      const std::string& s = self.str();
      if (n == "count") {
        if (sub.empty()) return Value::integer(int64_t(code_points(s).size()));
        int64_t c = 0;
        for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++c;
        return Value::integer(c);
      }
      size_t p = n[0] == 'r' ? s.rfind(sub) : s.find(sub);
      if (p == std::string::npos) {
        if (n == "index" || n == "rindex") fail("ValueError", "substring not found");
        return Value::integer(-1);
      }
      return Value::integer(cp_index(s, p));
    });
  }
  if (name == "join") {
    return bind(obj, "join", [](Evaluator& ev, const Value& self, A& a) {
      std::vector<Value> items = iterate(a.get(0, "iterable"));
      std::string out;
      for (size_t k = 0; k < items.size(); ++k) {
        if (items[k].kind != Kind::String)
          fail("TypeError", "sequence item " + std::to_string(k) + ": expected str instance, " +
                                type_name(items[k]) + " found");
        if (k) out += self.str();
        out += items[k].str();
        ev.charge(out.size());
      }
      return Value::string(std::move(out));
    });
  }
  if (name == "format") {
    return bind(obj, "format", [](Evaluator& ev, const Value& self, A& a) {
      return Value::string(str_format(ev, self.str(), a));
    });
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" ||
      name == "isupper" || name == "islower" || name == "isnumeric" || name == "isdecimal") {
    std::string n = name;
    return bind(obj, "is", [n](Evaluator&, const Value& self, A&) {
      const std::string& s = self.str();
      bool cased = false, ok = !s.empty();
      for (unsigned char c : s) {
        bool digit = c >= '0' && c <= '9', lo = c >= 'a' && c <= 'z', up = c >= 'A' && c <= 'Z';
        if (n == "isdigit" || n == "isnumeric" || n == "isdecimal")
          ok = ok && digit;
        else if (n == "isalpha")
          ok = ok && (lo || up);
        else if (n == "isalnum")
          ok = ok && (lo || up || digit);
        else if (n == "isspace")
          ok = ok && is_ws(char(c));
        else if (n == "isupper") {
          if (lo) ok = false;
          cased = cased || up;
        } else {
          if (up) ok = false;
          cased = cased || lo;
        }
      }
      if (n == "isupper" || n == "islower") ok = !s.empty() && ok && cased;
      return Value::boolean(ok);
    });
  }
  if (name == "splitlines") {
    return bind(obj, "splitlines", [](Evaluator&, const Value& self, A& a) {
      const std::string& s = self.str();
      std::vector<Value> out;
      size_t b = 0;
      for (size_t k = 0; k < s.size(); ++k) {
        if (s[k] == '\n' || s[k] == '\r') {
          out.push_back(Value::string(s.substr(b, k - b)));
          if (s[k] == '\r' && k + 1 < s.size() && s[k + 1] == '\n') ++k;
          b = k + 1;
        }
      }
      if (b < s.size()) out.push_back(Value::string(s.substr(b)));
      return Value::list(std::move(out));
    });
  }
  return Value();
}

}  // namespace

Value method(Evaluator& ev, const Value& obj, const std::string& name) {
  using A = Args;
  if (obj.kind == Kind::String) return str_method(ev, obj, name);
  if (obj.kind == Kind::Dict) {
    if (name == "items" || name == "keys" || name == "values") {
      int which = name == "items" ? 0 : name == "keys" ? 1 : 2;
      return bind(obj, "items", [which](Evaluator& ev, const Value& self, A&) {
        std::vector<Value> out;
        ev.step(self.dct().items.size());
        for (const auto& kv : self.dct().items) {
          if (which == 0)
            out.push_back(Value::list({kv.first, kv.second}, true));
          else
            out.push_back(which == 1 ? kv.first : kv.second);
        }
        return Value::list(std::move(out));
      });
    }
    if (name == "get") {
      return bind(obj, "get", [](Evaluator&, const Value& self, A& a) {
        Value key = a.get(0, "key");
        Value def = a.get(1, "default", Value::none());
        const Value* v = self.dct().find(key);
        return v ? *v : def;
      });
    }
    if (name == "copy")
      return bind(obj, "copy", [](Evaluator&, const Value& self, A&) {
        Value d = Value::dict();
        for (const auto& kv : self.dct().items) d.dct().push(kv.first, kv.second);
        return d;
      });
    if (name == "pop" || name == "popitem" || name == "setdefault" || name == "update" ||
        name == "clear")
      return unsafe(obj, name);
    return Value();
  }
  if (obj.kind == Kind::List && !obj.lst().generator) {
    if (name == "index" || name == "count") {
      bool count = name == "count";
      return bind(obj, "index", [count](Evaluator& ev, const Value& self, A& a) {
        Value x = a.get(0, "value");
        int64_t c = 0;
        const auto& items = self.lst().items;
        for (size_t k = 0; k < items.size(); ++k) {
          ev.step();
          if (equals(items[k], x)) {
            if (!count) return Value::integer(int64_t(k));
            ++c;
          }
        }
        if (!count) fail("ValueError", repr(x) + " is not in list");
        return Value::integer(c);
      });
    }
    if (name == "copy")
      return bind(obj, "copy",
                  [](Evaluator&, const Value& self, A&) { return Value::list(self.lst().items); });
    if (!obj.lst().tuple &&
        (name == "append" || name == "extend" || name == "insert" || name == "pop" ||
         name == "remove" || name == "reverse" || name == "sort" || name == "clear"))
      return unsafe(obj, name);
  }
  return Value();
}

}  // namespace geist::jinja
