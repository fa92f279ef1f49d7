#include "chat/json_stream.h"

namespace geist::chat {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_number_char(char c) {
  return is_digit(c) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
bool valid_number(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && s[i] == '-') ++i;
  if (i >= s.size() || !is_digit(s[i])) return false;
  if (s[i] == '0') {
    ++i;
  } else {
    while (i < s.size() && is_digit(s[i])) ++i;
  }
  if (i < s.size() && s[i] == '.') {
    const size_t b = ++i;
    while (i < s.size() && is_digit(s[i])) ++i;
    if (i == b) return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    const size_t b = i;
    while (i < s.size() && is_digit(s[i])) ++i;
    if (i == b) return false;
  }
  return i == s.size();
}

// The code unit of "\uXXXX" at s[pos] (s holds at least pos + 6 bytes), or -1.
int escape_unit(std::string_view s, size_t pos) {
  if (s[pos] != '\\' || s[pos + 1] != 'u') return -1;
  int v = 0;
  for (size_t k = pos + 2; k < pos + 6; ++k) {
    const int h = hex_value(s[k]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

}  // namespace

JsonStream JsonStream::object_tail() {
  JsonStream j(true);
  j.stack_.push_back('{');
  j.state_ = State::COMMA_OR_END;
  return j;
}

void JsonStream::emit(std::string_view text, std::string* out) {
  out->append(pending_);
  out->append(text);
  pending_.clear();
  held_raw_.clear();
}

void JsonStream::value_done() { state_ = stack_.empty() ? State::DONE : State::COMMA_OR_END; }

bool JsonStream::end_number(std::string* out) {
  if (!valid_number(token_)) return false;
  emit(token_, out);
  token_.clear();
  value_done();
  return true;
}

bool JsonStream::start_value(char c, std::string* out) {
  const bool top = stack_.empty();
  if (top && object_only_ && c != '{') return false;
  if (c == '{' || c == '[') {
    if (stack_.size() >= kMaxDepth) return false;
    emit(std::string_view(&c, 1), out);
    stack_.push_back(c);
    state_ = c == '{' ? State::KEY_OR_END : State::VALUE_OR_END;
    return true;
  }
  if (c == '"') {
    emit("\"", out);
    key_ = false;
    state_ = State::STRING;
    return true;
  }
  if (c == '-' || is_digit(c)) {
    token_.assign(1, c);
    state_ = State::NUMBER;
    return true;
  }
  if (c == 't' || c == 'f' || c == 'n') {
    token_.assign(1, c);
    state_ = State::LITERAL;
    return true;
  }
  return false;
}

bool JsonStream::string_char(char c, std::string* out) {
  // The decided text goes out for a value, into the pending key for a key.
  auto put = [&](std::string_view text) {
    if (key_) {
      pending_.append(text);
    } else {
      emit(text, out);
    }
  };
  const auto u = static_cast<unsigned char>(c);
  if (!token_.empty() && token_[0] == '\\') {
    token_.push_back(c);
    const size_t n = token_.size();
    if (n == 2) {
      if (c == 'u') return true;
      if (std::string_view("\"\\/bfnrt").find(c) == std::string_view::npos) return false;
    } else if (n < 6 || (n > 6 && n < 12)) {
      if (n == 7 && c != '\\') return false;
      if (n == 8 && c != 'u') return false;
      if ((n <= 6 || n > 8) && hex_value(c) < 0) return false;
      return true;
    } else if (n == 6) {
      const int unit = escape_unit(token_, 0);
      if (unit < 0) return false;
      if (unit >= 0xDC00 && unit <= 0xDFFF) return false;  // a low surrogate first
      if (unit >= 0xD800 && unit <= 0xDBFF) return true;   // its low half must follow
    } else if (n == 12) {
      const int low = escape_unit(token_, 6);
      if (low < 0xDC00 || low > 0xDFFF) return false;
    }
    put(token_);
    token_.clear();
    return true;
  }
  if (utf8_need_ > 0) {
    if ((u & 0xC0) != 0x80) return false;
    token_.push_back(c);
    if (--utf8_need_ == 0) {
      put(token_);
      token_.clear();
    }
    return true;
  }
  if (u < 0x20) return false;
  if (u >= 0x80) {
    if (u >= 0xC2 && u <= 0xDF) {
      utf8_need_ = 1;
    } else if (u >= 0xE0 && u <= 0xEF) {
      utf8_need_ = 2;
    } else if (u >= 0xF0 && u <= 0xF4) {
      utf8_need_ = 3;
    } else {
      return false;
    }
    token_.assign(1, c);
    return true;
  }
  if (c == '\\') {
    token_.assign(1, c);
    return true;
  }
  if (c == '"') {
    if (key_) {
      pending_.push_back('"');
      state_ = State::COLON;
    } else {
      emit("\"", out);
      value_done();
    }
    return true;
  }
  put(std::string_view(&c, 1));
  return true;
}

bool JsonStream::step(char c, std::string* out) {
  switch (state_) {
    case State::STRING:
      return string_char(c, out);
    case State::NUMBER:
      token_.push_back(c);  // feed() ends the number at the first byte that is not one
      return true;
    case State::LITERAL: {
      token_.push_back(c);
      for (std::string_view lit : {"true", "false", "null"}) {
        if (lit == token_) {
          emit(token_, out);
          token_.clear();
          value_done();
          return true;
        }
        if (lit.substr(0, token_.size()) == token_) return true;
      }
      return false;
    }
    case State::DONE:
      return false;
    default:
      break;
  }
  if (is_ws(c)) return true;
  switch (state_) {
    case State::VALUE:
      return start_value(c, out);
    case State::VALUE_OR_END:
      if (c != ']') return start_value(c, out);
      emit("]", out);
      stack_.pop_back();
      value_done();
      return true;
    case State::KEY_OR_END:
    case State::KEY:
      if (c == '}' && state_ == State::KEY_OR_END) {
        emit("}", out);
        stack_.pop_back();
        value_done();
        return true;
      }
      if (c != '"') return false;
      pending_.push_back('"');
      key_ = true;
      state_ = State::STRING;
      return true;
    case State::COLON:
      if (c != ':') return false;
      pending_.push_back(':');
      state_ = State::VALUE;
      return true;
    case State::COMMA_OR_END:
      if (c == ',') {
        pending_.assign(1, ',');
        state_ = stack_.back() == '{' ? State::KEY : State::VALUE;
        return true;
      }
      if ((c == '}' && stack_.back() == '{') || (c == ']' && stack_.back() == '[')) {
        emit(std::string_view(&c, 1), out);
        stack_.pop_back();
        value_done();
        return true;
      }
      return false;
    default:
      return false;
  }
}

JsonStream::Result JsonStream::feed(std::string_view text, size_t* consumed, std::string* out) {
  *consumed = 0;
  if (state_ == State::DONE) return Result::DONE;
  if (error_) return Result::ERROR;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (state_ == State::NUMBER && !is_number_char(c)) {
      if (!end_number(out)) {
        error_ = true;
        *consumed = i;
        return Result::ERROR;
      }
      if (state_ == State::DONE) {
        *consumed = i;
        return Result::DONE;
      }
    }
    held_raw_.push_back(c);
    if (!step(c, out)) {
      held_raw_.pop_back();
      error_ = true;
      *consumed = i;
      return Result::ERROR;
    }
    if (state_ == State::DONE) {
      *consumed = i + 1;
      return Result::DONE;
    }
  }
  *consumed = text.size();
  return Result::MORE;
}

void JsonStream::finish(std::string* out) {
  if (!error_ && state_ == State::NUMBER && !end_number(out)) error_ = true;
}

std::string JsonStream::close_suffix() const {
  if (state_ == State::DONE) return "";
  std::string s;
  if (state_ == State::STRING && !key_) s.push_back('"');
  for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) s.push_back(*it == '{' ? '}' : ']');
  return s;
}

}  // namespace geist::chat
