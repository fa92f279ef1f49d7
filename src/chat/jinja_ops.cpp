// Python's arithmetic and sequence operators on Jinja values, `in`, and printf-style `%`.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "chat/jinja_eval.h"

namespace geist::jinja {

namespace {

// Simple (one-to-one) case mapping of the scripts chat text uses most: ASCII, Latin-1, Latin
// Extended-A, Greek, Cyrillic. Other code points are left as they are; 'ß'.upper() is 'SS' as
// in Python.
uint32_t map_case(uint32_t c, bool upper) {
  if (upper) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 0x20;
    if (c == 0xFF) return 0x178;
    if (c >= 0x100 && c <= 0x17F) {
      bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
      if (c == 0x131) return 'I';
      if (c == 0x130 || c == 0x138 || c == 0x149) return c;
      if (c == 0x17F) return 'S';
      if (odd_upper) return (c % 2 == 0) ? c - 1 : c;
      return (c % 2 == 1) ? c - 1 : c;
    }
    if (c >= 0x3B1 && c <= 0x3C9) return c == 0x3C2 ? 0x3A3 : c - 0x20;
    if (c >= 0x430 && c <= 0x44F) return c - 0x20;
    if (c >= 0x450 && c <= 0x45F) return c - 0x50;
    return c;
  }
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 0x20;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F) {
    bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (c == 0x130 || c == 0x131 || c == 0x138 || c == 0x149 || c == 0x17F) return c;
    if (odd_upper) return (c % 2 == 1) ? c + 1 : c;
    return (c % 2 == 0) ? c + 1 : c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 0x20;
  if (c >= 0x410 && c <= 0x42F) return c + 0x20;
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  return c;
}

void put_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

std::string convert_case(const std::string& s, bool upper) {
  std::string out;
  out.reserve(s.size());
  for (size_t k = 0; k < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[k]);
    if (c < 0x80) {
      out += char(map_case(c, upper));
      ++k;
      continue;
    }
    // two-byte sequences cover every mapped code point above ASCII
    if ((c & 0xE0) == 0xC0 && k + 1 < s.size() &&
        (static_cast<unsigned char>(s[k + 1]) & 0xC0) == 0x80) {
      uint32_t cp = (uint32_t(c & 0x1F) << 6) | (static_cast<unsigned char>(s[k + 1]) & 0x3F);
      if (upper && cp == 0xDF) {
        out += "SS";
      } else {
        put_utf8(out, map_case(cp, upper));
      }
      k += 2;
      continue;
    }
    out += s[k++];
  }
  return out;
}

}  // namespace

std::string to_upper(std::string s) { return convert_case(s, true); }
std::string to_lower(std::string s) { return convert_case(s, false); }

namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  fail("TypeError", "unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" +
                        type_name(b) + "'");
}

[[noreturn]] void overflow() { fail("OverflowError", "integer result too large"); }

bool is_int(const Value& v) { return v.kind == Kind::Int || v.kind == Kind::Bool; }

Value repeat(Evaluator& ev, const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.kind == Kind::String) {
    const std::string& s = seq.str();
    if (!s.empty() && uint64_t(n) > ev.limits().max_output_bytes / s.size() + 1)
      fail_limit("string repetition past max_output_bytes");
    size_t total = s.size() * size_t(n);
    ev.charge(total);
    std::string out;
    if (total == 0) return string_like(seq, std::move(out));  // '' * n, or n <= 0
    out.reserve(total);
    out = s;
    while (out.size() * 2 <= total) out += out;  // doubling: O(total) copies
    out.append(out.data(), total - out.size());
    return string_like(seq, std::move(out));
  }
  const auto& items = seq.lst().items;
  if (!items.empty() && uint64_t(n) > ev.limits().max_output_bytes / (16 * items.size()) + 1)
    fail_limit("list repetition past max_output_bytes");
  ev.charge(items.size() * size_t(n) * 16);
  std::vector<Value> out;
  out.reserve(items.size() * size_t(n));
  for (int64_t k = 0; k < n; ++k) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), seq.lst().tuple);
}

double py_fmod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

}  // namespace

Value binary_op(Evaluator& ev, const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  bool nums = a.is_number() && b.is_number();
  bool ints = is_int(a) && is_int(b);
  if (op == "+") {
    if (ints) {
      int64_t r;
      if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) overflow();
      return Value::integer(r);
    }
    if (nums) return Value::number(a.as_double() + b.as_double());
    if (a.kind == Kind::String) {
      if (b.kind != Kind::String)
        fail("TypeError", "can only concatenate str (not \"" + type_name(b) + "\") to str");
      ev.charge(a.str().size() + b.str().size());
      // Markup + str and str + Markup escape the plain side (markupsafe's __add__/__radd__).
      if (a.is_markup() && !b.is_markup()) return Value::markup(a.str() + html_escape(b.str()));
      if (b.is_markup() && !a.is_markup()) return Value::markup(html_escape(a.str()) + b.str());
      return string_like(a, a.str() + b.str());
    }
    if (a.kind == Kind::List && !a.lst().generator) {
      if (b.kind != Kind::List || b.lst().tuple != a.lst().tuple || b.lst().generator)
        fail("TypeError", "can only concatenate " + type_name(a) + " (not \"" + type_name(b) +
                              "\") to " + type_name(a));
      ev.charge(16 * (a.lst().items.size() + b.lst().items.size()));
      std::vector<Value> items = a.lst().items;
      items.insert(items.end(), b.lst().items.begin(), b.lst().items.end());
      return Value::list(std::move(items), a.lst().tuple);
    }
    unsupported("+", a, b);
  }
  if (op == "-") {
    if (ints) {
      int64_t r;
      if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) overflow();
      return Value::integer(r);
    }
    if (nums) return Value::number(a.as_double() - b.as_double());
    unsupported("-", a, b);
  }
  if (op == "*") {
    if (ints) {
      int64_t r;
      if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) overflow();
      return Value::integer(r);
    }
    if (nums) return Value::number(a.as_double() * b.as_double());
    bool seq_a = a.kind == Kind::String || (a.kind == Kind::List && !a.lst().generator);
    bool seq_b = b.kind == Kind::String || (b.kind == Kind::List && !b.lst().generator);
    if (seq_a && is_int(b)) return repeat(ev, a, b.as_int());
    if (seq_b && is_int(a)) return repeat(ev, b, a.as_int());
    if (seq_a || seq_b)
      fail("TypeError",
           "can't multiply sequence by non-int of type '" + type_name(seq_a ? b : a) + "'");
    unsupported("*", a, b);
  }
  if (op == "/") {
    if (!nums) unsupported("/", a, b);
    if (b.as_double() == 0) fail("ZeroDivisionError", "division by zero");
    return Value::number(a.as_double() / b.as_double());
  }
  if (op == "//") {
    if (!nums) unsupported("//", a, b);
    if (ints) {
      if (b.as_int() == 0) fail("ZeroDivisionError", "integer division or modulo by zero");
      int64_t x = a.as_int(), y = b.as_int();
      if (x == INT64_MIN && y == -1) overflow();
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
      return Value::integer(q);
    }
    if (b.as_double() == 0) fail("ZeroDivisionError", "float floor division by zero");
    return Value::number(std::floor(a.as_double() / b.as_double()));
  }
  if (op == "%") {
    if (a.kind == Kind::String) {
      std::string s = percent_format(ev, a.str(), b);
      return Value::string(std::move(s));
    }
    if (!nums) unsupported("%", a, b);
    if (ints) {
      if (b.as_int() == 0) fail("ZeroDivisionError", "integer division or modulo by zero");
      int64_t x = a.as_int(), y = b.as_int();
      if (y == -1) return Value::integer(0);
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::integer(m);
    }
    if (b.as_double() == 0) fail("ZeroDivisionError", "float modulo");
    return Value::number(py_fmod(a.as_double(), b.as_double()));
  }
  if (op == "**") {
    if (!nums) unsupported("** or pow()", a, b);
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), r = 1;
      while (e > 0) {
        ev.step();
        if (e & 1)
          if (__builtin_mul_overflow(r, base, &r)) overflow();
        e >>= 1;
        if (e > 0 && __builtin_mul_overflow(base, base, &base)) {
          if (base != 0 && base != 1 && base != -1) overflow();
        }
      }
      return Value::integer(r);
    }
    double x = a.as_double(), y = b.as_double();
    if (x == 0 && y < 0) fail("ZeroDivisionError", "0.0 cannot be raised to a negative power");
    return Value::number(std::pow(x, y));
  }
  fail("TemplateRuntimeError", "unknown operator " + op);
}

bool Evaluator::contains(const Value& c, const Value& item) {
  switch (c.kind) {
    case Kind::Undefined:
      return false;
    case Kind::String:
      if (item.kind != Kind::String) {
        if (item.is_undefined()) fail_undefined(item);
        fail("TypeError", "'in <string>' requires string as left operand, not " + type_name(item));
      }
      return c.str().find(item.str()) != std::string::npos;
    case Kind::List:
      for (const auto& v : c.lst().items) {
        step();
        if (equals(v, item)) return true;
      }
      return false;
    case Kind::Dict:
      if (c.dct().is_namespace || c.dct().is_loop) break;
      return c.dct().find(item) != nullptr;
    default:
      break;
  }
  fail("TypeError", "argument of type '" + type_name(c) + "' is not iterable");
}

}  // namespace geist::jinja
