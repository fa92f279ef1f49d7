// json.dumps as Hugging Face's tojson calls it: ensure_ascii=False (non-ASCII kept, control
// characters as \u00XX), indent as an int or a string, separators, sort_keys, key order kept,
// Python's float repr, NaN/Infinity, and TypeError for what JSON cannot hold.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/jinja_value.h"

namespace geist::jinja {

static void json_string(std::string& out, std::string_view s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else {
          out += char(c);
        }
    }
  }
  out += '"';
}

static std::string json_float(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x < 0 ? "-Infinity" : "Infinity";
  return float_repr(x);
}

static void dump(std::string& out, const Value& v, const DumpOptions& o, int level, int depth) {
  if (depth > 512) fail("RecursionError", "maximum recursion depth exceeded while encoding");
  auto newline = [&](int lvl) {
    out += '\n';
    for (int k = 0; k < lvl; ++k) out += o.indent;
  };
  switch (v.kind) {
    case Kind::None:
      out += "null";
      return;
    case Kind::Bool:
      out += v.b ? "true" : "false";
      return;
    case Kind::Int:
      out += std::to_string(v.i);
      return;
    case Kind::Float:
      out += json_float(v.f);
      return;
    case Kind::String:
      json_string(out, v.str());
      return;
    case Kind::List: {
      if (v.lst().generator) break;
      const auto& items = v.lst().items;
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += o.item_sep;
        if (o.has_indent) newline(level + 1);
        dump(out, items[k], o, level + 1, depth + 1);
      }
      if (o.has_indent) newline(level);
      out += ']';
      return;
    }
    case Kind::Dict: {
      if (v.dct().is_namespace || v.dct().is_loop) break;
      std::vector<std::pair<std::string, const Value*>> items;
      for (const auto& kv : v.dct().items) {
        const Value& k = kv.first;
        std::string key;
        if (k.kind == Kind::String)
          key = k.str();
        else if (k.kind == Kind::Int)
          key = std::to_string(k.i);
        else if (k.kind == Kind::Float)
          key = json_float(k.f);
        else if (k.kind == Kind::Bool)
          key = k.b ? "true" : "false";
        else if (k.kind == Kind::None)
          key = "null";
        else
          fail("TypeError", "keys must be str, int, float, bool or None, not " + type_name(k));
        items.emplace_back(std::move(key), &kv.second);
      }
      if (items.empty()) {
        out += "{}";
        return;
      }
      if (o.sort_keys)
        std::stable_sort(items.begin(), items.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      out += '{';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += o.item_sep;
        if (o.has_indent) newline(level + 1);
        json_string(out, items[k].first);
        out += o.key_sep;
        dump(out, *items[k].second, o, level + 1, depth + 1);
      }
      if (o.has_indent) newline(level);
      out += '}';
      return;
    }
    default:
      break;
  }
  fail("TypeError", "Object of type " + type_name(v) + " is not JSON serializable");
}

std::string json_dumps(const Value& v, const DumpOptions& opt) {
  std::string out;
  dump(out, v, opt, 0, 0);
  return out;
}

}  // namespace geist::jinja
