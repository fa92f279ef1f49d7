// Jinja2's built-in filters on sequences (jinja2/filters.py). Filters that return generators in
// Jinja2 (map, select, reject, selectattr, rejectattr, unique, items, batch) return a list
// marked as a generator, so that tojson refuses them as Python does.
#include <algorithm>
#include <cstdlib>
#include <optional>

#include "chat/jinja_eval.h"
#include "chat/jinja_filters.h"

namespace geist::jinja {

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

namespace {

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

std::optional<Value> Evaluator::sequence_filter(const std::string& n, const Value& v, Args& a) {
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
  if (n == "groupby") {
    // Sorted by the key (case-insensitively unless case_sensitive), then runs of equal keys;
    // the grouper is the first item's key as it is.
    const Value attr = a.get(0, "attribute");
    const Value def = a.get(1, "default", Value::none());
    const bool cs = truthy(a.get(2, "case_sensitive", Value::boolean(false)));
    const auto key_of = [&](const Value& item) {
      Value k = get_attr_path(*this, item, attr);
      return k.is_undefined() && !def.is_none() ? def : k;
    };
    std::vector<std::pair<Value, Value>> keyed;  // (sort key, item)
    for (Value& item : iterate(v)) {
      Value k = lowered(key_of(item), cs);
      keyed.emplace_back(std::move(k), std::move(item));
    }
    step(keyed.size() * 4);
    std::stable_sort(keyed.begin(), keyed.end(),
                     [](const auto& x, const auto& y) { return less(x.first, y.first); });
    std::vector<Value> groups;
    for (size_t k = 0; k < keyed.size();) {
      std::vector<Value> members;
      size_t e = k;
      for (; e < keyed.size() && equals(keyed[e].first, keyed[k].first); ++e) {
        members.push_back(keyed[e].second);
      }
      Value g = Value::list({key_of(keyed[k].second), Value::list(std::move(members))}, true);
      g.lst().group = true;
      groups.push_back(std::move(g));
      k = e;
    }
    return Value::list(std::move(groups));
  }
  return std::nullopt;
}

}  // namespace geist::jinja
