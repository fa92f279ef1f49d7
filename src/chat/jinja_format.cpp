// Python's two string formattings as Jinja templates reach them: printf-style `fmt % args` (and
// the `format` filter) and str.format with its format-spec mini-language
// ([[fill]align][sign][#][0][width][grouping][.precision][type]). Widths count code points, as
// Python's do; every width and precision is charged against the output limit before it is built.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "chat/jinja_eval.h"

namespace geist::jinja {
namespace {

struct Spec {
  std::string fill = " ";
  char align = 0;  // '<', '>', '^', '=' or 0 (the type's default)
  char sign = '-';
  bool alt = false, zero = false;
  int64_t width = 0;
  char group = 0;  // ',' or '_'
  int64_t prec = -1;
  char type = 0;
};

size_t cp_count(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::string cp_prefix(const std::string& s, int64_t n) {
  size_t i = 0;
  for (int64_t k = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && k++ == n) break;
  }
  return s.substr(0, i);
}

std::string utf8_of(int64_t cp) {
  if (cp < 0 || cp > 0x10FFFF) fail("OverflowError", "%c arg not in range(0x110000)");
  std::string s;
  append_utf8(s, static_cast<uint32_t>(cp));
  return s;
}

// snprintf of one double, any length.
std::string cformat(const std::string& fmt, double x) {
  const int n = std::snprintf(nullptr, 0, fmt.c_str(), x);
  if (n <= 0) return "";
  std::string s(size_t(n) + 1, '\0');
  std::snprintf(s.data(), s.size(), fmt.c_str(), x);
  s.resize(size_t(n));
  return s;
}

// Separators every `every` digits of the integer part of digits[0, end).
std::string grouped(const std::string& digits, char sep, int every) {
  if (sep == 0) return digits;
  size_t end = digits.find_first_not_of("0123456789abcdefABCDEF");
  if (end == std::string::npos) end = digits.size();
  std::string out;
  for (size_t k = 0; k < end; ++k) {
    if (k > 0 && (end - k) % size_t(every) == 0) out += sep;
    out += digits[k];
  }
  return out + digits.substr(end);
}

// Pads prefix (sign, 0x) + body to the width.
std::string pad(Evaluator& ev, const std::string& prefix, const std::string& body, const Spec& s,
                char default_align) {
  char align = s.align ? s.align : default_align;
  std::string fill = s.fill;
  if (s.zero && !s.align) {
    fill = "0";
    align = '=';
  }
  const size_t len = cp_count(prefix) + cp_count(body);
  if (s.width <= int64_t(len)) return prefix + body;
  ev.charge(size_t(s.width) * fill.size());
  const size_t n = size_t(s.width) - len;
  std::string pads;
  for (size_t k = 0; k < n; ++k) pads += fill;
  if (align == '<') return prefix + body + pads;
  if (align == '=') return prefix + pads + body;
  if (align == '^') {
    std::string left, right;
    for (size_t k = 0; k < n / 2; ++k) left += fill;
    for (size_t k = n / 2; k < n; ++k) right += fill;
    return left + prefix + body + right;
  }
  return pads + prefix + body;
}

std::string type_error_name(const Value& v) { return v.kind == Kind::Bool ? "bool" : type_name(v); }

[[noreturn]] void unknown_code(char type, const Value& v) {
  fail("ValueError", std::string("Unknown format code '") + type + "' for object of type '" +
                         type_error_name(v) + "'");
}

std::string format_int(Evaluator& ev, int64_t x, const Spec& s, bool percent) {
  if (s.type == 'c') return pad(ev, "", utf8_of(x), s, '>');
  const uint64_t mag = x < 0 ? uint64_t(0) - uint64_t(x) : uint64_t(x);
  const char t = s.type == 0 || s.type == 'n' || s.type == 'i' || s.type == 'u' ? 'd' : s.type;
  const int base = t == 'x' || t == 'X' ? 16 : t == 'o' ? 8 : t == 'b' ? 2 : 10;
  std::string digits;
  uint64_t m = mag;
  do {
    digits += "0123456789abcdef"[m % uint64_t(base)];
    m /= uint64_t(base);
  } while (m > 0);
  std::reverse(digits.begin(), digits.end());
  if (t == 'X') std::transform(digits.begin(), digits.end(), digits.begin(), ::toupper);
  if (percent && s.prec > int64_t(digits.size())) {
    ev.charge(size_t(s.prec));
    digits.insert(0, size_t(s.prec) - digits.size(), '0');
  }
  digits = grouped(digits, s.group, base == 10 ? 3 : 4);
  std::string prefix = x < 0 ? "-" : s.sign == '+' ? "+" : s.sign == ' ' ? " " : "";
  if (s.alt && base != 10) prefix += t == 'X' ? "0X" : t == 'x' ? "0x" : t == 'o' ? "0o" : "0b";
  return pad(ev, prefix, digits, s, '>');
}

std::string format_float(Evaluator& ev, double x, const Spec& s) {
  if (s.prec > 0) ev.charge(size_t(s.prec));
  const double a = std::fabs(x);
  std::string body;
  const std::string alt = s.alt ? "#" : "";
  if (s.type == 0 && s.prec < 0) {
    body = to_str(Value::number(a));
  } else if (s.type == 0) {
    // 'g'-like with at least one digit after the point; exponent from precision - 1 on.
    const int64_t p = std::max<int64_t>(s.prec, 1);
    const std::string e = cformat("%." + std::to_string(p - 1) + "e", a);
    const int exp = std::isfinite(a) ? std::atoi(e.c_str() + e.find('e') + 1) : 0;
    if (!std::isfinite(a)) {
      body = e;
    } else if (exp < -4 || exp >= p - 1) {
      std::string mant = e.substr(0, e.find('e'));
      if (!s.alt && mant.find('.') != std::string::npos) {
        mant.erase(mant.find_last_not_of('0') + 1);
        if (mant.back() == '.') mant.pop_back();
      }
      body = mant + cformat("e%+03.0f", double(exp));
    } else {
      body = cformat("%." + std::to_string(p - 1 - exp) + "f", a);
      if (!s.alt && body.find('.') != std::string::npos) {
        body.erase(body.find_last_not_of('0') + 1);
        if (body.back() == '.') body += '0';
      }
    }
  } else if (s.type == '%') {
    body = cformat("%" + alt + "." + std::to_string(s.prec < 0 ? 6 : s.prec) + "f", a * 100) + "%";
  } else {
    const char t = s.type == 'n' ? 'g' : s.type;
    body = cformat("%" + alt + "." + std::to_string(s.prec < 0 ? 6 : s.prec) + t, a);
  }
  body = grouped(body, s.group, 3);
  const std::string prefix = std::signbit(x) ? "-" : s.sign == '+' ? "+" : s.sign == ' ' ? " " : "";
  return pad(ev, prefix, body, s, '>');
}

std::string format_str(Evaluator& ev, const std::string& text, const Spec& s, char default_align) {
  std::string body = s.prec >= 0 ? cp_prefix(text, s.prec) : text;
  Spec t = s;
  t.zero = false;
  return pad(ev, "", body, t, default_align);
}

// Python's format(v, spec) (str.format's fields).
std::string format_value(Evaluator& ev, const Value& v, const std::string& spec_text) {
  Spec s;
  const std::string& f = spec_text;
  size_t k = 0;
  const auto lead = [&](size_t i) -> size_t {  // bytes of the code point at i
    const auto c = static_cast<unsigned char>(f[i]);
    return c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
  };
  if (!f.empty()) {
    const size_t n = std::min(lead(0), f.size());
    if (n < f.size() && std::string_view("<>=^").find(f[n]) != std::string_view::npos) {
      s.fill = f.substr(0, n);
      s.align = f[n];
      k = n + 1;
    } else if (std::string_view("<>=^").find(f[0]) != std::string_view::npos) {
      s.align = f[0];
      k = 1;
    }
  }
  if (k < f.size() && (f[k] == '+' || f[k] == '-' || f[k] == ' ')) s.sign = f[k++];
  if (k < f.size() && f[k] == '#') s.alt = true, ++k;
  if (k < f.size() && f[k] == '0') s.zero = true, ++k;
  const auto number = [&](int64_t* out) {
    size_t b = k;
    while (k < f.size() && f[k] >= '0' && f[k] <= '9') ++k;
    if (k - b > 9) fail("ValueError", "Too many decimal digits in format string");
    if (k > b) *out = std::atoll(f.substr(b, k - b).c_str());
    return k > b;
  };
  number(&s.width);
  if (k < f.size() && (f[k] == ',' || f[k] == '_')) s.group = f[k++];
  if (k < f.size() && f[k] == '.') {
    ++k;
    if (!number(&s.prec)) fail("ValueError", "Format specifier missing precision");
  }
  if (k < f.size()) s.type = f[k++];
  if (k < f.size())
    fail("ValueError",
         "Invalid format specifier '" + f + "' for object of type '" + type_error_name(v) + "'");
  if (s.width > 0) ev.charge(size_t(s.width));
  switch (v.kind) {
    case Kind::Bool:
    case Kind::Int:
      if (v.kind == Kind::Bool && s.type == 0 && f.empty()) return to_str(v);
      if (std::string_view("eEfFgG%").find(s.type) != std::string_view::npos && s.type != 0) {
        return format_float(ev, double(v.as_int()), s);
      }
      if (s.type != 0 && std::string_view("dnxXobc").find(s.type) == std::string_view::npos) {
        unknown_code(s.type, v);
      }
      if (s.prec >= 0) fail("ValueError", "Precision not allowed in integer format specifier");
      return format_int(ev, v.as_int(), s, false);
    case Kind::Float:
      if (s.type != 0 && std::string_view("eEfFgGn%").find(s.type) == std::string_view::npos) {
        unknown_code(s.type, v);
      }
      return format_float(ev, v.f, s);
    case Kind::String:
      if (s.type != 0 && s.type != 's') unknown_code(s.type, v);
      if (s.align == '=')
        fail("ValueError", "'=' alignment not allowed in string format specifier");
      return format_str(ev, v.str(), s, '<');
    default:
      if (!f.empty()) {
        fail("TypeError", "unsupported format string passed to " +
                              std::string(v.is_none() ? "NoneType" : type_name(v)) + ".__format__");
      }
      return to_str(v);
  }
}

}  // namespace

std::string percent_format(Evaluator& ev, const std::string& fmt, const Value& args) {
  std::vector<Value> vals;
  const Value* mapping = nullptr;
  if (args.kind == Kind::List && args.lst().tuple)
    vals = args.lst().items;
  else if (args.kind == Kind::Dict)
    mapping = &args;
  else
    vals.push_back(args);
  size_t next = 0;
  const auto next_arg = [&]() -> Value {
    if (mapping) return *mapping;
    if (next >= vals.size()) fail("TypeError", "not enough arguments for format string");
    return vals[next++];
  };
  std::string out;
  for (size_t k = 0; k < fmt.size(); ++k) {
    char c = fmt[k];
    if (c != '%') {
      out += c;
      continue;
    }
    if (++k >= fmt.size()) fail("ValueError", "incomplete format");
    Value v;
    bool have = false;
    if (fmt[k] == '(' && mapping) {
      size_t e = fmt.find(')', k);
      if (e == std::string::npos) fail("ValueError", "incomplete format key");
      const Value* got = mapping->dct().find(std::string_view(fmt).substr(k + 1, e - k - 1));
      if (!got) fail("KeyError", repr_string(fmt.substr(k + 1, e - k - 1)));
      v = *got;
      have = true;
      k = e + 1;
    }
    Spec s;  // align stays 0 (right, or zero-padded with '0') unless '-'
    for (; k < fmt.size() && std::string_view("-+ #0").find(fmt[k]) != std::string_view::npos;
         ++k) {
      if (fmt[k] == '-') s.align = '<';
      if (fmt[k] == '+' || (fmt[k] == ' ' && s.sign != '+')) s.sign = fmt[k];
      if (fmt[k] == '#') s.alt = true;
      if (fmt[k] == '0') s.zero = true;
    }
    const auto number = [&](int64_t* out_n) {
      if (k < fmt.size() && fmt[k] == '*') {
        ++k;
        Value w = next_arg();
        if (w.kind != Kind::Int) fail("TypeError", "* wants int");
        *out_n = w.as_int();
        return;
      }
      size_t b = k;
      while (k < fmt.size() && fmt[k] >= '0' && fmt[k] <= '9') ++k;
      if (k - b > 9) fail("ValueError", "width too big");
      if (k > b) *out_n = std::atoll(fmt.substr(b, k - b).c_str());
    };
    number(&s.width);
    if (s.width < 0) {
      s.align = '<';
      s.width = -s.width;
    }
    if (k < fmt.size() && fmt[k] == '.') {
      ++k;
      s.prec = 0;
      number(&s.prec);
    }
    while (k < fmt.size() && (fmt[k] == 'h' || fmt[k] == 'l' || fmt[k] == 'L')) ++k;
    if (k >= fmt.size()) fail("ValueError", "incomplete format");
    const char conv = fmt[k];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!have) v = next_arg();
    if (s.width > 0) ev.charge(size_t(s.width));
    if (s.align == '<') s.zero = false;
    s.type = conv;  // (format_str ignores the zero flag)
    switch (conv) {
      case 's':
      case 'r':
      case 'a': {
        std::string text = conv == 's' ? to_str(v) : repr(v);
        ev.charge(text.size());
        out += format_str(ev, text, s, '>');
        break;
      }
      case 'c':
        if (v.kind == Kind::Int) {
          out += format_int(ev, v.as_int(), s, true);
        } else if (v.is_string() && cp_count(v.str()) == 1) {
          out += format_str(ev, v.str(), s, '>');
        } else {
          fail("TypeError", "%c requires int or char");
        }
        break;
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o': {
        if (!v.is_number()) {
          fail("TypeError",
               std::string("%") + conv + " format: a real number is required, not " + type_name(v));
        }
        bool integral = v.kind == Kind::Int || v.kind == Kind::Bool;
        if (!integral && (conv == 'x' || conv == 'X' || conv == 'o')) {
          fail("TypeError",
               std::string("%") + conv + " format: an integer is required, not " + type_name(v));
        }
        double d = integral ? 0.0 : std::trunc(v.as_double());
        if (!integral && !(std::fabs(d) < 9.2e18)) fail("OverflowError", "integer too large");
        out += format_int(ev, integral ? v.as_int() : int64_t(d), s, true);
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
        if (!v.is_number()) fail("TypeError", "must be real number, not " + type_name(v));
        out += format_float(ev, v.as_double(), s);
        break;
      default:
        fail("ValueError", std::string("unsupported format character '") + conv + "'");
    }
    ev.charge(out.size());
  }
  if (!mapping && next < vals.size())
    fail("TypeError", "not all arguments converted during string formatting");
  return out;
}

std::string str_format(Evaluator& ev, const std::string& fmt, Args& args) {
  std::string out;
  size_t auto_idx = 0;
  bool manual = false, automatic = false;
  for (size_t k = 0; k < fmt.size(); ++k) {
    const char c = fmt[k];
    if (c == '}') {
      if (k + 1 >= fmt.size() || fmt[k + 1] != '}')
        fail("ValueError", "Single '}' encountered in format string");
      out += '}';
      ++k;
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (k + 1 < fmt.size() && fmt[k + 1] == '{') {
      out += '{';
      ++k;
      continue;
    }
    const size_t e = fmt.find('}', k);
    if (e == std::string::npos) fail("ValueError", "Single '{' encountered in format string");
    std::string field = fmt.substr(k + 1, e - k - 1);
    if (field.find('{') != std::string::npos) {
      fail("ValueError", "nested replacement fields in a format spec are not supported");
    }
    std::string spec;
    char conv = 0;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      if (bang + 2 != field.size() ||
          std::string_view("rsa").find(field[bang + 1]) == std::string_view::npos)
        fail("ValueError", "Unknown conversion specifier " + field.substr(bang + 1));
      conv = field[bang + 1];
      field.resize(bang);
    }
    // The argument: "", an index or a name, then .attr / [key] parts.
    const size_t first_end = std::min(field.find_first_of(".["), field.size());
    const std::string head = field.substr(0, first_end);
    Value v;
    if (head.empty()) {
      if (manual)
        fail("ValueError",
             "cannot switch from manual field specification to automatic field numbering");
      automatic = true;
      if (auto_idx >= args.pos.size())
        fail("IndexError", "Replacement index " + std::to_string(auto_idx) +
                               " out of range for positional args tuple");
      v = args.pos[auto_idx++];
    } else if (std::all_of(head.begin(), head.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      if (automatic)
        fail("ValueError",
             "cannot switch from automatic field numbering to manual field specification");
      manual = true;
      const size_t idx = size_t(std::stoul(head.substr(0, 9)));
      if (idx >= args.pos.size())
        fail("IndexError", "Replacement index " + head + " out of range for positional args tuple");
      v = args.pos[idx];
    } else {
      bool found = false;
      for (auto& kv : args.kw) {
        if (kv.first == head) {
          v = kv.second;
          found = true;
        }
      }
      if (!found) fail("KeyError", repr_string(head));
    }
    for (size_t p = first_end; p < field.size();) {
      if (field[p] == '.') {
        const size_t q = std::min(field.find_first_of(".[", p + 1), field.size());
        v = ev.getattr(v, field.substr(p + 1, q - p - 1));
        p = q;
      } else {
        const size_t q = field.find(']', p);
        if (q == std::string::npos) fail("ValueError", "Missing ']' in format string");
        const std::string key = field.substr(p + 1, q - p - 1);
        const bool digits =
            !key.empty() && key.size() < 18 &&
            std::all_of(key.begin(), key.end(), [](char d) { return d >= '0' && d <= '9'; });
        v = ev.getitem(v, digits ? Value::integer(std::atoll(key.c_str())) : Value::string(key));
        p = q + 1;
      }
      if (v.is_undefined()) fail_undefined(v);
    }
    if (conv != 0) v = Value::string(conv == 's' ? to_str(v) : repr(v));
    out += format_value(ev, v, spec);
    ev.charge(out.size());
    k = e;
  }
  return out;
}

}  // namespace geist::jinja
