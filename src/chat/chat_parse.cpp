#include "chat/chat_parse.h"

#include <algorithm>
#include <array>

#include "chat/chat_parse_tools.h"
#include "chat/stop.h"

namespace geist::chat {
namespace {

using detail::find_first_marker;
using detail::is_proper_prefix;
using detail::is_space;
using detail::partial_marker_len;

using namespace detail::markers;  // NOLINT(google-build-using-namespace)

// Splits text at its trailing whitespace: [head, tail).
size_t trailing_space_start(std::string_view text) {
  size_t e = text.size();
  while (e > 0 && is_space(text[e - 1])) --e;
  return e;
}

void push(std::vector<ChatDelta>* deltas, ChatDelta::Kind kind, std::string_view text,
          int index = -1) {
  if (text.empty()) return;
  if (!deltas->empty() && deltas->back().kind == kind && deltas->back().index == index &&
      kind != ChatDelta::Kind::TOOL_CALL_BEGIN) {
    deltas->back().text.append(text);
    return;
  }
  ChatDelta d;
  d.kind = kind;
  d.text = std::string(text);
  d.index = index;
  deltas->push_back(std::move(d));
}

}  // namespace

size_t ChatParser::JsonScan::advance(std::string_view text) {
  for (; pos < text.size() && !broken; ++pos) {
    const char c = text[pos];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return ++pos;
      broken = depth < 0;
    }
  }
  return std::string_view::npos;
}

ChatParser::ChatParser(ParserOptions opts) : opts_(std::move(opts)) {
  uint64_t seed = opts_.id_seed;
  if (seed == 0) {
    std::random_device rd;
    seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  rng_.seed(seed);
  if (opts_.starts_in_reasoning) state_ = State::REASONING;
}

std::string ChatParser::new_call_id() {
  static constexpr std::string_view kAlnum =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id.push_back(kAlnum[rng_() % kAlnum.size()]);
  return id;
}

void ChatParser::add_reasoning(std::string_view text, std::vector<ChatDelta>* deltas) {
  const size_t e = trailing_space_start(text);
  std::string_view head = text.substr(0, e);
  if (msg_.reasoning_content.empty()) head = detail::ltrim(head);
  if (head.empty()) {
    if (!msg_.reasoning_content.empty()) reasoning_ws_.append(text);
    return;
  }
  std::string piece = std::move(reasoning_ws_);
  piece.append(head);
  reasoning_ws_.assign(text.substr(e));
  msg_.reasoning_content.append(piece);
  push(deltas, ChatDelta::Kind::REASONING, piece);
}

void ChatParser::add_content(std::string_view text, std::vector<ChatDelta>* deltas) {
  if (content_lstrip_) {
    text = detail::ltrim(text);
    if (text.empty()) return;
    content_lstrip_ = false;
  }
  const size_t e = trailing_space_start(text);
  if (e == 0) {
    content_ws_.append(text);
    return;
  }
  std::string piece = std::move(content_ws_);
  piece.append(text.substr(0, e));
  content_ws_.assign(text.substr(e));
  msg_.content.append(piece);
  reply_start_ = false;
  push(deltas, ChatDelta::Kind::CONTENT, piece);
}

void ChatParser::flush_content_ws(std::vector<ChatDelta>* deltas) {
  if (content_ws_.empty() || content_lstrip_) return;
  msg_.content.append(content_ws_);
  push(deltas, ChatDelta::Kind::CONTENT, content_ws_);
  content_ws_.clear();
}

void ChatParser::add_tool_call(ToolCall call, std::vector<ChatDelta>* deltas) {
  if (call.id.empty()) call.id = new_call_id();
  content_ws_.clear();  // whitespace before a call is not content
  content_lstrip_ = true;
  reply_start_ = false;
  ChatDelta begin;
  begin.kind = ChatDelta::Kind::TOOL_CALL_BEGIN;
  begin.index = static_cast<int>(msg_.tool_calls.size());
  begin.id = call.id;
  begin.name = call.name;
  ChatDelta args;
  args.kind = ChatDelta::Kind::TOOL_CALL_ARGS;
  args.index = begin.index;
  args.text = call.arguments;
  deltas->push_back(std::move(begin));
  deltas->push_back(std::move(args));
  msg_.tool_calls.push_back(std::move(call));
}

void ChatParser::begin_call(std::string name, std::vector<ChatDelta>* deltas) {
  ToolCall call;
  call.id = new_call_id();
  call.name = std::move(name);
  content_ws_.clear();
  content_lstrip_ = true;
  reply_start_ = false;
  ChatDelta begin;
  begin.kind = ChatDelta::Kind::TOOL_CALL_BEGIN;
  begin.index = static_cast<int>(msg_.tool_calls.size());
  begin.id = call.id;
  begin.name = call.name;
  deltas->push_back(std::move(begin));
  msg_.tool_calls.push_back(std::move(call));
}

void ChatParser::add_args(std::string_view text, std::vector<ChatDelta>* deltas) {
  msg_.tool_calls.back().arguments.append(text);
  push(deltas, ChatDelta::Kind::TOOL_CALL_ARGS, text, static_cast<int>(msg_.tool_calls.size()) - 1);
}

bool ChatParser::step_start(bool final) {
  if (!opts_.format.reasoning) {
    state_ = State::CONTENT;
    return true;
  }
  const std::string_view rest = detail::ltrim(buf_);
  if (rest.substr(0, kThinkOpen.size()) == kThinkOpen) {
    buf_.erase(0, buf_.size() - rest.size() + kThinkOpen.size());
    state_ = State::REASONING;
    return true;
  }
  if (!final && (rest.empty() || is_proper_prefix(rest, kThinkOpen))) return false;
  state_ = State::CONTENT;
  return true;
}

bool ChatParser::step_reasoning(bool final, std::vector<ChatDelta>* deltas) {
  std::vector<std::string_view> ends = {kThinkClose};
  // Qwen3-Coder / Qwen3.5 may start a call without closing the think block (llama.cpp).
  if (opts_.format.tools == ToolCallFormat::QWEN3_CODER) ends.push_back(kToolCallOpen);
  size_t which = 0;
  const size_t p = find_first_marker(buf_, ends, &which);
  if (p != std::string_view::npos) {
    add_reasoning(std::string_view(buf_).substr(0, p), deltas);
    reasoning_ws_.clear();
    buf_.erase(0, p + (ends[which] == kThinkClose ? kThinkClose.size() : 0));
    state_ = State::CONTENT;
    content_lstrip_ = true;
    return true;
  }
  if (buf_.empty()) return false;
  if (final) {
    add_reasoning(buf_, deltas);
    reasoning_ws_.clear();
    buf_.clear();
    return false;
  }
  size_t hold = partial_marker_len(buf_, ends);
  hold += utf8_incomplete_tail(std::string_view(buf_).substr(0, buf_.size() - hold));
  add_reasoning(std::string_view(buf_).substr(0, buf_.size() - hold), deltas);
  buf_.erase(0, buf_.size() - hold);
  return false;
}

bool ChatParser::step_content(bool final, std::vector<ChatDelta>* deltas) {
  const ToolCallFormat fmt = opts_.format.tools;
  if (fmt == ToolCallFormat::LLAMA3_JSON && reply_start_) {
    // Llama 3.x answers with a bare JSON call: the reply (after whitespace) starting with '{'.
    const std::string_view rest = detail::ltrim(buf_);
    if (rest.empty() && !final) return false;
    if (!rest.empty() && rest.front() == '{') {
      json_scan_ = {};
      state_ = State::LLAMA_JSON;
      return true;
    }
    if (!rest.empty()) reply_start_ = false;
  }
  std::vector<std::string_view> markers;
  if (fmt == ToolCallFormat::HERMES || fmt == ToolCallFormat::GLM45) markers = {kToolCallOpen};
  if (fmt == ToolCallFormat::QWEN3_CODER) markers = {kToolCallOpen, kFunctionOpen};
  if (fmt == ToolCallFormat::LLAMA3_JSON) markers = {kPythonTag};
  size_t which = 0;
  const size_t p =
      markers.empty() ? std::string_view::npos : find_first_marker(buf_, markers, &which);
  if (p != std::string_view::npos) {
    add_content(std::string_view(buf_).substr(0, p), deltas);
    buf_.erase(0, p);
    if (markers[which] == kPythonTag) {
      buf_.erase(0, kPythonTag.size());
      json_scan_ = {};
      state_ = State::LLAMA_JSON;
    } else {
      tool_open_ = std::string(markers[which]);
      tool_scan_ = tool_open_.size();
      tool_whole_ = false;
      state_ = State::TOOL;
    }
    return true;
  }
  if (buf_.empty()) return false;
  size_t hold = final ? 0 : partial_marker_len(buf_, markers);
  if (!final) hold += utf8_incomplete_tail(std::string_view(buf_).substr(0, buf_.size() - hold));
  add_content(std::string_view(buf_).substr(0, buf_.size() - hold), deltas);
  buf_.erase(0, buf_.size() - hold);
  return false;
}

bool ChatParser::step_tool(bool final, std::vector<ChatDelta>* deltas) {
  const ToolCallFormat fmt = opts_.format.tools;
  if (fmt != ToolCallFormat::HERMES) {
    // XML calls always stream; an opening marker without a call after it is content.
    const size_t at = tool_open_ == kFunctionOpen ? 0 : tool_open_.size();
    const Header h = start_xml_call(std::string_view(buf_).substr(at), at, final, deltas);
    if (h == Header::MORE) return false;
    if (h == Header::NO) {
      add_content(std::string_view(buf_).substr(0, tool_open_.size()), deltas);
      buf_.erase(0, tool_open_.size());
      state_ = State::CONTENT;
    }
    return true;
  }
  if (!tool_whole_) {
    // The call streams when its layout can be: decided once its name is read.
    const Header h = start_json_call(std::string_view(buf_).substr(tool_open_.size()),
                                     tool_open_.size(), final, deltas);
    if (h == Header::MORE) return false;
    if (h == Header::MATCH) return true;
    tool_whole_ = true;
  }
  // Parsed whole once </tool_call> is read; unclosed or unparsable, it is content.
  const std::string_view text = buf_;
  size_t end = text.find(kToolCallClose, tool_scan_);
  // The next search starts where a close marker could still begin: linear in the call's size.
  if (end == std::string_view::npos && text.size() >= kToolCallClose.size()) {
    tool_scan_ = std::max(tool_scan_, text.size() - kToolCallClose.size() + 1);
  }
  if (end == std::string_view::npos && !final) return false;
  ToolCall call;
  if (end != std::string_view::npos) {
    const std::string_view body = text.substr(tool_open_.size(), end - tool_open_.size());
    end += kToolCallClose.size();
    if (detail::parse_json_call(body, &call)) {
      add_tool_call(std::move(call), deltas);
      buf_.erase(0, end);
      state_ = State::CONTENT;
      return true;
    }
  } else {
    end = text.size();
  }
  add_content(text.substr(0, end), deltas);
  buf_.erase(0, end);
  state_ = State::CONTENT;
  return true;
}

bool ChatParser::step_llama_json(bool final, std::vector<ChatDelta>* deltas) {
  const std::string_view text = buf_;
  const std::string_view rest = detail::ltrim(text);
  const size_t lead = text.size() - rest.size();
  if (state_ == State::LLAMA_AFTER) {
    // After a call: ';' asks for another one, anything else is content.
    if (rest.empty()) {
      buf_.clear();
      return false;
    }
    if (rest.front() == ';') {
      buf_.erase(0, lead + 1);
      json_scan_ = {};
      state_ = State::LLAMA_JSON;
      return true;
    }
    buf_.erase(0, lead);
    state_ = State::CONTENT;
    return true;
  }
  if (rest.empty()) return false;
  auto fallback = [&] {
    reply_start_ = false;
    state_ = State::CONTENT;
    return true;
  };
  if (rest.front() != '{') return fallback();
  const Header h = start_json_call(rest, lead, final, deltas);
  if (h == Header::MORE) return false;
  if (h == Header::MATCH) return true;
  // Decide early when the object cannot be a call: its first key must be "name" or "type".
  const std::string_view inner = detail::ltrim(rest.substr(1));
  if (!final && (inner.empty() || is_proper_prefix(inner, "\"name\"") ||
                 is_proper_prefix(inner, "\"type\""))) {
    return false;
  }
  if (inner.substr(0, 6) != "\"name\"" && inner.substr(0, 6) != "\"type\"") return fallback();
  const size_t len = json_scan_.advance(rest);
  if (len == std::string_view::npos) {
    if (!final && !json_scan_.broken) return false;
    return fallback();
  }
  ToolCall call;
  if (!detail::parse_json_call(rest.substr(0, len), &call)) return fallback();
  add_tool_call(std::move(call), deltas);
  buf_.erase(0, lead + len);
  state_ = State::LLAMA_AFTER;
  return true;
}

bool ChatParser::step(bool final, std::vector<ChatDelta>* deltas) {
  switch (state_) {
    case State::START:
      return step_start(final);
    case State::REASONING:
      return step_reasoning(final, deltas);
    case State::CONTENT:
      return step_content(final, deltas);
    case State::TOOL:
      return step_tool(final, deltas);
    case State::LLAMA_JSON:
    case State::LLAMA_AFTER:
      return step_llama_json(final, deltas);
    case State::ARGS_JSON:
      return step_args_json(final, deltas);
    case State::ARGS_TAIL:
      return step_args_tail(final);
    case State::ARGS_XML:
      return step_args_xml(final, deltas);
    case State::XML_NEXT:
      return step_xml_next(final);
  }
  return false;
}

void ChatParser::run(bool final, std::vector<ChatDelta>* deltas) {
  try {
    // Every step that returns true consumed text or moved to another state; the bound only
    // guards against a broken invariant turning into a hang.
    const size_t limit = 4 * buf_.size() + 64;
    for (size_t guard = 0; guard < limit && step(final, deltas); ++guard) {
    }
  } catch (...) {
    // Allocation failure or a dependency's exception: what is left is content.
    msg_.content.append(buf_);
    push(deltas, ChatDelta::Kind::CONTENT, buf_);
    buf_.clear();
    state_ = State::CONTENT;
  }
}

void ChatParser::feed(std::string_view piece, std::vector<ChatDelta>* deltas) {
  if (finished_) return;
  buf_.append(piece);
  run(false, deltas);
}

void ChatParser::finish(std::vector<ChatDelta>* deltas) {
  if (finished_) return;
  run(true, deltas);
  if (!buf_.empty()) {  // only after a broken invariant: never lose text
    add_content(buf_, deltas);
    buf_.clear();
  }
  flush_content_ws(deltas);
  reasoning_ws_.clear();
  finished_ = true;
}

ChatMsg parse_chat_output(std::string_view text, const ParserOptions& opts) {
  ChatParser parser(opts);
  std::vector<ChatDelta> deltas;
  parser.feed(text, &deltas);
  parser.finish(&deltas);
  return parser.message();
}

}  // namespace geist::chat
