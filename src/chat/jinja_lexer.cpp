// The Jinja lexer with Hugging Face's settings: trim_blocks (one newline after a block or comment
// tag is dropped), lstrip_blocks (spaces and tabs before a block or comment tag at the start of a
// line are dropped), whitespace control (`{%-`, `-%}`, `{{-`, `-}}`, `{#-`, `-#}`, `+` to keep),
// comments, {% raw %}, and newline normalisation (\r\n and \r read as \n; one trailing newline
// of the source is dropped, as keep_trailing_newline=False does).
#include <cctype>

#include "chat/jinja_ast.h"

namespace geist::jinja {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_val(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's "unicode-escape" decoding of a string literal's body; unknown escapes stay as written.
std::string unescape(std::string_view s) {
  std::string out;
  for (size_t k = 0; k < s.size(); ++k) {
    char c = s[k];
    if (c != '\\' || k + 1 >= s.size()) {
      out += c;
      continue;
    }
    char e = s[++k];
    switch (e) {
      case '\n':
        break;
      case '\\':
      case '\'':
      case '"':
        out += e;
        break;
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'v':
        out += '\v';
        break;
      case 'a':
        out += '\a';
        break;
      case 'x':
      case 'u':
      case 'U': {
        size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t cp = 0;
        bool ok = k + n < s.size();
        for (size_t d = 1; ok && d <= n; ++d) {
          int h = hex_val(s[k + d]);
          if (h < 0)
            ok = false;
          else
            cp = cp * 16 + uint32_t(h);
        }
        if (!ok) {
          out += '\\';
          out += e;
          break;
        }
        append_utf8(out, cp);
        k += n;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          uint32_t cp = uint32_t(e - '0');
          for (int d = 0; d < 2 && k + 1 < s.size() && s[k + 1] >= '0' && s[k + 1] <= '7'; ++d)
            cp = cp * 8 + uint32_t(s[++k] - '0');
          append_utf8(out, cp);
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : s_(std::move(src)) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < s_.size()) {
      size_t k = find_tag(pos_);
      if (k == std::string::npos) {
        emit_text(s_.substr(pos_));
        pos_ = s_.size();
        break;
      }
      std::string text = s_.substr(pos_, k - pos_);
      char kind = s_[k + 1];
      size_t p = k + 2;
      char sign = 0;
      if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) sign = s_[p++];
      size_t raw_end = kind == '%' ? match_raw_begin(p) : std::string::npos;
      text = strip_before(text, sign, kind != '{', line_starting);
      emit_text(text);
      advance_to(p);
      if (raw_end != std::string::npos) {
        advance_to(raw_end);
        line_starting = lex_raw();
      } else if (kind == '#') {
        line_starting = lex_comment();
      } else {
        line_starting = lex_tag(kind == '%');
      }
    }
    toks_.push_back({Tok::End, "", line_});
    return std::move(toks_);
  }

 private:
  std::string s_;
  size_t pos_ = 0;
  size_t line_pos_ = 0;  // position up to which line_ counts newlines
  int line_ = 1;
  std::vector<Token> toks_;

  void advance_to(size_t p) {
    for (size_t k = line_pos_; k < p && k < s_.size(); ++k)
      if (s_[k] == '\n') ++line_;
    line_pos_ = std::max(line_pos_, p);
    pos_ = p;
  }
  [[noreturn]] void error(const std::string& msg) { throw SyntaxError{line_, msg}; }

  size_t find_tag(size_t from) const {
    for (size_t k = s_.find('{', from); k != std::string::npos; k = s_.find('{', k + 1)) {
      if (k + 1 < s_.size() && (s_[k + 1] == '{' || s_[k + 1] == '%' || s_[k + 1] == '#')) return k;
    }
    return std::string::npos;
  }

  void emit_text(std::string text) {
    if (!text.empty()) toks_.push_back({Tok::Text, std::move(text), line_});
  }

  // `-` strips all whitespace before the tag; otherwise lstrip_blocks strips the spaces and
  // tabs between the line's start and a block or comment tag.
  static std::string strip_before(std::string text, char sign, bool lstrip_kind,
                                  bool line_starting) {
    if (sign == '-') {
      size_t e = text.size();
      while (e > 0 && is_space(text[e - 1])) --e;
      text.resize(e);
    } else if (sign != '+' && lstrip_kind) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting) {
        bool ws = l_pos < text.size();
        for (size_t k = l_pos; k < text.size(); ++k)
          if (!is_space(text[k])) ws = false;
        if (ws) text.resize(l_pos);
      }
    }
    return text;
  }

  size_t skip_ws(size_t p) const {
    while (p < s_.size() && is_space(s_[p])) ++p;
    return p;
  }
  bool at(size_t p, std::string_view w) const { return s_.compare(p, w.size(), w) == 0; }

  // `{%[-+]? raw [-]?%}` starting after the sign: returns the end of the tag, or npos.
  size_t match_raw_begin(size_t p) const {
    p = skip_ws(p);
    if (!at(p, "raw")) return std::string::npos;
    p = skip_ws(p + 3);
    if (at(p, "-%}")) return skip_ws(p + 3);
    if (at(p, "%}")) return p + 2;
    return std::string::npos;
  }

  // After the end of a block or comment: -X} strips whitespace, +X} keeps, X} drops one \n.
  size_t after_end(size_t p, char sign) const {
    if (sign == '-') return skip_ws(p);
    if (sign == '+') return p;
    if (p < s_.size() && s_[p] == '\n') return p + 1;
    return p;
  }

  bool lex_raw() {
    for (size_t k = find_tag(pos_); k != std::string::npos; k = find_tag(k + 1)) {
      if (s_[k + 1] != '%') continue;
      size_t p = k + 2;
      char sign = 0;
      if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) sign = s_[p++];
      p = skip_ws(p);
      if (!at(p, "endraw")) continue;
      p = skip_ws(p + 6);
      char esign = 0;
      if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) esign = s_[p++];
      if (!at(p, "%}")) continue;
      std::string text = strip_before(s_.substr(pos_, k - pos_), sign, true, false);
      emit_text(std::move(text));
      size_t end = after_end(p + 2, esign);
      advance_to(end);
      return end > 0 && s_[end - 1] == '\n';
    }
    error("Missing end of raw directive");
  }

  bool lex_comment() {
    size_t c = s_.find("#}", pos_);
    if (c == std::string::npos) error("Missing end of comment tag");
    char sign = 0;
    if (c > pos_ && (s_[c - 1] == '-' || s_[c - 1] == '+')) sign = s_[c - 1];
    size_t end = after_end(c + 2, sign);
    advance_to(end);
    return s_[end - 1] == '\n';
  }

  bool lex_tag(bool block) {
    toks_.push_back({block ? Tok::BlockBegin : Tok::VarBegin, "", line_});
    std::vector<char> balance;
    for (;;) {
      advance_to(skip_ws(pos_));
      if (pos_ >= s_.size())
        error(block ? "unexpected end of template, expected '%}'"
                    : "unexpected end of template, expected '}}'");
      if (balance.empty()) {
        const char* close = block ? "%}" : "}}";
        size_t end = std::string::npos;
        if (s_[pos_] == '-' && at(pos_ + 1, close))
          end = after_end(pos_ + 3, '-');
        else if (block && s_[pos_] == '+' && at(pos_ + 1, close))
          end = pos_ + 3;
        else if (at(pos_, close))
          end = block ? after_end(pos_ + 2, 0) : pos_ + 2;
        if (end != std::string::npos) {
          toks_.push_back({block ? Tok::BlockEnd : Tok::VarEnd, "", line_});
          advance_to(end);
          return s_[end - 1] == '\n';
        }
      }
      lex_token(balance);
    }
  }

  void lex_token(std::vector<char>& balance) {
    size_t p = pos_;
    char c = s_[p];
    if (is_digit(c)) {
      size_t q = p;
      auto digits = [&] {
        while (q < s_.size() &&
               (is_digit(s_[q]) || (s_[q] == '_' && q + 1 < s_.size() && is_digit(s_[q + 1]))))
          ++q;
      };
      digits();
      bool is_float = false;
      bool after_dot = p > 0 && s_[p - 1] == '.';
      if (!after_dot && q + 1 < s_.size() && s_[q] == '.' && is_digit(s_[q + 1])) {
        ++q;
        digits();
        is_float = true;
      }
      if (!after_dot && q < s_.size() && (s_[q] == 'e' || s_[q] == 'E')) {
        size_t r = q + 1;
        if (r < s_.size() && (s_[r] == '+' || s_[r] == '-')) ++r;
        if (r < s_.size() && is_digit(s_[r])) {
          q = r;
          digits();
          is_float = true;
        }
      }
      std::string num;
      for (size_t k = p; k < q; ++k)
        if (s_[k] != '_') num += s_[k];
      toks_.push_back({is_float ? Tok::Float : Tok::Int, num, line_});
      advance_to(q);
      return;
    }
    if (is_name_start(c)) {
      size_t q = p;
      while (q < s_.size() && is_name_char(s_[q])) ++q;
      toks_.push_back({Tok::Name, s_.substr(p, q - p), line_});
      advance_to(q);
      return;
    }
    if (c == '\'' || c == '"') {
      size_t q = p + 1;
      while (q < s_.size() && s_[q] != c) {
        if (s_[q] == '\\') ++q;
        ++q;
      }
      if (q >= s_.size())
        error("unexpected char " + repr_string(std::string(1, c)) + " at " + std::to_string(p));
      toks_.push_back(
          {Tok::String, unescape(std::string_view(s_).substr(p + 1, q - p - 1)), line_});
      advance_to(q + 1);
      return;
    }
    static const char* two[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : two) {
      if (at(p, op)) {
        toks_.push_back({Tok::Op, op, line_});
        advance_to(p + 2);
        return;
      }
    }
    static const std::string_view one = "+-*/%~<>=.,:|()[]{};";
    if (one.find(c) == std::string_view::npos)
      error("unexpected char " + repr_string(std::string(1, c)) + " at " + std::to_string(p));
    if (c == '(') balance.push_back(')');
    if (c == '[') balance.push_back(']');
    if (c == '{') balance.push_back('}');
    if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) error(std::string("unexpected '") + c + "'");
      if (balance.back() != c)
        error(std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
      balance.pop_back();
    }
    toks_.push_back({Tok::Op, std::string(1, c), line_});
    advance_to(p + 1);
  }
};

}  // namespace

std::vector<Token> lex(std::string_view source) {
  std::string s;
  s.reserve(source.size());
  for (size_t k = 0; k < source.size(); ++k) {
    if (source[k] == '\r') {
      s += '\n';
      if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
    } else {
      s += source[k];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return Lexer(std::move(s)).run();
}

}  // namespace geist::jinja
