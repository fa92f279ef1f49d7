// The output parser's streamed tool calls (see chat_parse.h): a call begins once its name is
// read, then its arguments go out as fragments of their final JSON text. JSON arguments
// (Hermes, Llama 3) are re-emitted compactly as JsonStream decides them; XML parameters
// (Qwen3-Coder, GLM-4.5) go out one by one as they close, a text-typed value character by
// character as it arrives.
#include <algorithm>

#include "chat/chat_parse.h"
#include "chat/chat_parse_tools.h"
#include "chat/stop.h"

namespace geist::chat {
namespace {

using namespace detail::markers;  // NOLINT(google-build-using-namespace)
using detail::is_proper_prefix;
using detail::ltrim;
using detail::trim;

// Header text longer than this is not a call header (keeps the re-scan of an undecided header
// bounded; a name is short).
constexpr size_t kMaxHeader = 512;

bool starts_with(std::string_view s, std::string_view what) {
  return s.substr(0, what.size()) == what;
}

// The JSON text of a string without its quotes.
std::string json_string_body(std::string_view s) {
  const std::string q = detail::dump_json(Json(std::string(s)));
  return q.substr(1, q.size() - 2);
}

enum class Scan { MORE, NO, OK };

// A JSON string without escapes at text[*pos] == '"'; advances past its closing quote.
Scan read_plain_string(std::string_view text, size_t* pos, std::string* out) {
  if (*pos >= text.size()) return Scan::MORE;
  if (text[*pos] != '"') return Scan::NO;
  for (size_t i = *pos + 1; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\\' || c < 0x20) return Scan::NO;
    if (c == '"') {
      out->assign(text.substr(*pos + 1, i - *pos - 1));
      *pos = i + 1;
      return Scan::OK;
    }
  }
  return Scan::MORE;
}

struct JsonHeader {
  Scan scan = Scan::MORE;
  std::string name;
  size_t args_at = 0;  // where the arguments object's '{' is
};

// {"name": "NAME", "arguments": {  (or "parameters"; an optional "type" string member before
// them): a call whose arguments can stream. Any other layout is NO (parsed whole instead).
JsonHeader match_json_header(std::string_view text) {
  JsonHeader h;
  const bool cut = text.size() > kMaxHeader;
  if (cut) text = text.substr(0, kMaxHeader);
  const auto more = [&] {
    h.scan = cut ? Scan::NO : Scan::MORE;
    return h;
  };
  const auto no = [&] {
    h.scan = Scan::NO;
    return h;
  };
  size_t i = 0;
  const auto skip_ws = [&] {
    while (i < text.size() && detail::is_space(text[i])) ++i;
    return i < text.size();
  };
  if (!skip_ws()) return more();
  if (text[i++] != '{') return no();
  for (bool first = true;; first = false) {
    if (!skip_ws()) return more();
    if (!first) {
      if (text[i++] != ',') return no();
      if (!skip_ws()) return more();
    }
    std::string key;
    Scan s = read_plain_string(text, &i, &key);
    if (s != Scan::OK) return s == Scan::MORE ? more() : no();
    if (!skip_ws()) return more();
    if (text[i++] != ':') return no();
    if (!skip_ws()) return more();
    if (key == "arguments" || key == "parameters") {
      if (h.name.empty() || text[i] != '{') return no();
      h.args_at = i;
      h.scan = Scan::OK;
      return h;
    }
    if (key != "name" && key != "type") return no();
    std::string value;
    s = read_plain_string(text, &i, &value);
    if (s != Scan::OK) return s == Scan::MORE ? more() : no();
    if (key == "name") {
      if (value.empty()) return no();
      h.name = std::move(value);
    }
  }
}

}  // namespace

ChatParser::Header ChatParser::start_json_call(std::string_view text, size_t text_at, bool final,
                                               std::vector<ChatDelta>* deltas) {
  JsonHeader h = match_json_header(text);
  if (h.scan == Scan::MORE) return final ? Header::NO : Header::MORE;
  if (h.scan == Scan::NO) return Header::NO;
  begin_call(std::move(h.name), deltas);
  buf_.erase(0, text_at + h.args_at);
  args_json_ = JsonStream(true);
  tail_done_ = false;
  call_close_ = opts_.format.tools == ToolCallFormat::HERMES ? kToolCallClose : "";
  state_ = State::ARGS_JSON;
  return Header::MATCH;
}

bool ChatParser::step_args_json(bool final, std::vector<ChatDelta>* deltas) {
  std::string out;
  size_t used = 0;
  const JsonStream::Result r = args_json_.feed(buf_, &used, &out);
  buf_.erase(0, used);
  if (r == JsonStream::Result::MORE && final) args_json_.finish(&out);
  add_args(out, deltas);
  if (r == JsonStream::Result::MORE && !final) return false;
  if (args_json_.done()) {
    args_json_ = JsonStream::object_tail();
    tail_done_ = false;
  } else {
    // Invalid JSON, or the reply ended inside it: the arguments close here, the text that did
    // not make it into them is content.
    add_args(args_json_.close_suffix(), deltas);
    buf_.insert(0, args_json_.held());
    tail_done_ = true;
  }
  state_ = State::ARGS_TAIL;
  return true;
}

bool ChatParser::step_args_tail(bool final) {
  if (!tail_done_) {
    std::string ignored;  // the members after the arguments ("id", ...) are not kept
    size_t used = 0;
    const JsonStream::Result r = args_json_.feed(buf_, &used, &ignored);
    buf_.erase(0, used);
    if (r == JsonStream::Result::MORE && !final) return false;
    if (!args_json_.done()) buf_.insert(0, args_json_.held());
    tail_done_ = true;
    return true;
  }
  if (call_close_.empty()) {
    state_ = State::LLAMA_AFTER;
    return true;
  }
  const std::string_view rest = ltrim(buf_);
  if (!final && (rest.empty() || is_proper_prefix(rest, call_close_))) return false;
  if (starts_with(rest, call_close_)) buf_.erase(0, buf_.size() - rest.size() + call_close_.size());
  state_ = State::CONTENT;
  return true;
}

ChatParser::Header ChatParser::start_xml_call(std::string_view text, size_t text_at, bool final,
                                              std::vector<ChatDelta>* deltas) {
  const std::string_view rest = ltrim(text);
  std::string_view name;
  size_t header_end = 0;  // in rest: where the parameters start
  if (opts_.format.tools == ToolCallFormat::GLM45) {
    // NAME\n<arg_key>... or NAME</tool_call>
    const size_t e = rest.find_first_of("<\n");
    if (e == std::string_view::npos || e > kMaxHeader) {
      return rest.size() > kMaxHeader || final ? Header::NO : Header::MORE;
    }
    name = trim(rest.substr(0, e));
    if (name.empty() || name.find_first_of("{\"") != std::string_view::npos) return Header::NO;
    const std::string_view after = ltrim(rest.substr(e));
    if (!final && (after.empty() || is_proper_prefix(after, kArgKeyOpen) ||
                   is_proper_prefix(after, kToolCallClose))) {
      return Header::MORE;
    }
    if (!starts_with(after, kArgKeyOpen) && !starts_with(after, kToolCallClose)) {
      return Header::NO;
    }
    header_end = rest.size() - after.size();
  } else {
    // <function=NAME>
    if (rest.empty() || is_proper_prefix(rest, kFunctionOpen)) {
      return final ? Header::NO : Header::MORE;
    }
    if (!starts_with(rest, kFunctionOpen)) return Header::NO;
    const size_t e = rest.find('>');
    if (e == std::string_view::npos || e > kMaxHeader) {
      return rest.size() > kMaxHeader || final ? Header::NO : Header::MORE;
    }
    name = trim(rest.substr(kFunctionOpen.size(), e - kFunctionOpen.size()));
    if (name.empty() || name.find_first_of("<\n") != std::string_view::npos) return Header::NO;
    header_end = e + 1;
  }
  begin_call(std::string(name), deltas);
  buf_.erase(0, text_at + (text.size() - rest.size()) + header_end);
  xml_first_ = true;
  xml_in_value_ = false;
  state_ = State::ARGS_XML;
  return Header::MATCH;
}

void ChatParser::close_xml_call(std::vector<ChatDelta>* deltas) {
  add_args(xml_first_ ? "{}" : "}", deltas);
  xml_in_value_ = false;
}

bool ChatParser::step_args_xml(bool final, std::vector<ChatDelta>* deltas) {
  if (xml_in_value_) return step_xml_value(final, deltas);
  const bool glm = opts_.format.tools == ToolCallFormat::GLM45;
  const std::string_view rest = ltrim(buf_);
  const size_t lead = buf_.size() - rest.size();
  const std::vector<std::string_view> ends =
      glm ? std::vector<std::string_view>{kToolCallClose}
          : std::vector<std::string_view>{kFunctionClose, kToolCallClose};
  for (std::string_view m : ends) {
    if (!starts_with(rest, m)) continue;
    close_xml_call(deltas);
    buf_.erase(0, lead + m.size());
    state_ = m == kFunctionClose ? State::XML_NEXT : State::CONTENT;
    return true;
  }
  // A parameter's header: <parameter=NAME>, or <arg_key>NAME</arg_key> <arg_value>.
  Scan scan = Scan::NO;
  std::string_view key;
  size_t header_len = 0;
  const std::string_view open = glm ? kArgKeyOpen : kParameterOpen;
  if (rest.empty() || is_proper_prefix(rest, open)) {
    scan = Scan::MORE;
  } else if (starts_with(rest, open)) {
    const size_t e = glm ? rest.find(kArgKeyClose) : rest.find('>');
    if (e == std::string_view::npos || e > kMaxHeader) {
      scan = rest.size() > kMaxHeader ? Scan::NO : Scan::MORE;
    } else {
      key = trim(rest.substr(open.size(), e - open.size()));
      header_len = e + (glm ? kArgKeyClose.size() : 1);
      scan =
          key.empty() || key.find_first_of("<\n") != std::string_view::npos ? Scan::NO : Scan::OK;
      if (glm && scan == Scan::OK) {
        const std::string_view after = ltrim(rest.substr(header_len));
        if (after.empty() || is_proper_prefix(after, kArgValueOpen)) {
          scan = Scan::MORE;
        } else if (starts_with(after, kArgValueOpen)) {
          header_len = rest.size() - after.size() + kArgValueOpen.size();
        } else {
          scan = Scan::NO;
        }
      }
    }
  }
  for (std::string_view m : ends) {
    if (is_proper_prefix(rest, m)) scan = Scan::MORE;
  }
  if (scan == Scan::MORE && !final) return false;
  if (scan != Scan::OK) {
    // Not a parameter, or the reply ended: the call closes, the rest is content.
    close_xml_call(deltas);
    state_ = State::CONTENT;
    return true;
  }
  xml_key_ = std::string(key);
  xml_header_ = buf_.substr(0, lead + header_len);
  buf_.erase(0, lead + header_len);
  xml_in_value_ = true;
  xml_scan_ = 0;
  xml_started_ = false;
  xml_text_ = detail::param_is_text(
      detail::param_schema(opts_.tools, msg_.tool_calls.back().name, xml_key_));
  return true;
}

bool ChatParser::step_xml_value(bool final, std::vector<ChatDelta>* deltas) {
  const bool glm = opts_.format.tools == ToolCallFormat::GLM45;
  const std::string_view close = glm ? kArgValueClose : kParameterClose;
  const bool strip = !glm;  // Qwen3-Coder puts the value on its own lines
  const auto member_start = [&] {
    std::string s = xml_first_ ? "{" : ",";
    xml_first_ = false;
    return s + detail::dump_json(Json(xml_key_)) + ":";
  };
  if (xml_text_ && !xml_started_) {
    if (buf_.empty() && !final) return false;
    if (strip && !buf_.empty() && buf_[0] == '\n') buf_.erase(0, 1);
    add_args(member_start() + "\"", deltas);
    xml_started_ = true;
  }
  const size_t p = buf_.find(close, xml_scan_);
  const bool closed = p != std::string::npos;
  if (!closed && buf_.size() >= close.size()) {
    xml_scan_ = std::max(xml_scan_, buf_.size() - close.size() + 1);
  }
  if (xml_text_) {
    size_t end = closed ? p : buf_.size();
    if (!closed && !final) {
      // Hold what may still be the close marker, the newline before it and a partial UTF-8
      // sequence; the rest of the value goes out now.
      size_t hold = detail::partial_marker_len(buf_, {close});
      if (strip && hold < buf_.size() && buf_[buf_.size() - hold - 1] == '\n') ++hold;
      hold += utf8_incomplete_tail(std::string_view(buf_).substr(0, buf_.size() - hold));
      end = buf_.size() - hold;
    }
    std::string_view v = std::string_view(buf_).substr(0, end);
    const bool last = closed || final;
    if (last && strip && !v.empty() && v.back() == '\n') v.remove_suffix(1);
    add_args(json_string_body(v) + (last ? "\"" : ""), deltas);
    if (!last) {
      buf_.erase(0, end);
      xml_scan_ = 0;
      return false;
    }
  } else if (closed) {
    std::string_view v = std::string_view(buf_).substr(0, p);
    if (strip && !v.empty() && v.front() == '\n') v.remove_prefix(1);
    if (strip && !v.empty() && v.back() == '\n') v.remove_suffix(1);
    const Json* schema = detail::param_schema(opts_.tools, msg_.tool_calls.back().name, xml_key_);
    add_args(member_start() + detail::dump_json(detail::convert_param(std::string(v), schema)),
             deltas);
  } else if (!final) {
    return false;
  } else {
    // The reply ended inside a typed value: nothing of it went out; it is content.
    buf_.insert(0, xml_header_);
    close_xml_call(deltas);
    state_ = State::CONTENT;
    return true;
  }
  xml_in_value_ = false;
  if (closed) {
    buf_.erase(0, p + close.size());
  } else {  // the reply ended inside a text value, which went out whole
    buf_.clear();
    close_xml_call(deltas);
    state_ = State::CONTENT;
  }
  return true;
}

bool ChatParser::step_xml_next(bool final) {
  const std::string_view rest = ltrim(buf_);
  if (!final && (rest.empty() || is_proper_prefix(rest, kToolCallClose) ||
                 is_proper_prefix(rest, kFunctionOpen))) {
    return false;
  }
  if (starts_with(rest, kToolCallClose)) {
    buf_.erase(0, buf_.size() - rest.size() + kToolCallClose.size());
    state_ = State::CONTENT;
  } else if (starts_with(rest, kFunctionOpen)) {  // the next call of the same block
    buf_.erase(0, buf_.size() - rest.size());
    tool_open_ = std::string(kFunctionOpen);
    state_ = State::TOOL;
  } else {
    state_ = State::CONTENT;
  }
  return true;
}

}  // namespace geist::chat
