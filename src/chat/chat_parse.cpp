#include "chat/chat_parse.h"

#include <algorithm>
#include <array>

#include "chat/chat_parse_tools.h"
#include "chat/stop.h"

namespace geist::chat {
namespace {

using detail::is_space;

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kToolCallOpen = "<tool_call>";
constexpr std::string_view kToolCallClose = "</tool_call>";
constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

// Length of the longest suffix of `text` that is a proper prefix of one of `markers`.
size_t partial_marker_len(std::string_view text, const std::vector<std::string_view>& markers) {
  size_t best = 0;
  for (std::string_view m : markers) {
    for (size_t k = std::min(m.size() - 1, text.size()); k > best; --k) {
      if (text.substr(text.size() - k) == m.substr(0, k)) {
        best = k;
        break;
      }
    }
  }
  return best;
}

// The earliest of `markers` in text: its position and index, or npos.
size_t find_first_marker(std::string_view text, const std::vector<std::string_view>& markers,
                         size_t* which) {
  size_t best = std::string_view::npos;
  for (size_t i = 0; i < markers.size(); ++i) {
    const size_t p = text.find(markers[i]);
    if (p < best) {
      best = p;
      *which = i;
    }
  }
  return best;
}

bool is_proper_prefix(std::string_view text, std::string_view of) {
  return text.size() < of.size() && of.substr(0, text.size()) == text;
}

// Splits text at its trailing whitespace: [head, tail).
size_t trailing_space_start(std::string_view text) {
  size_t e = text.size();
  while (e > 0 && is_space(text[e - 1])) --e;
  return e;
}

void push(std::vector<ChatDelta>* deltas, ChatDelta::Kind kind, std::string_view text) {
  if (text.empty()) return;
  if (!deltas->empty() && deltas->back().kind == kind && kind != ChatDelta::Kind::TOOL_CALL_BEGIN &&
      kind != ChatDelta::Kind::TOOL_CALL_ARGS) {
    deltas->back().text.append(text);
    return;
  }
  ChatDelta d;
  d.kind = kind;
  d.text = std::string(text);
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
  const bool bare_function = tool_open_ == kFunctionOpen;
  const std::string_view close = bare_function ? kFunctionClose : kToolCallClose;
  const std::string_view text = buf_;
  size_t end = text.find(close, tool_scan_);
  // The next search starts where a close marker could still begin: linear in the call's size.
  if (end == std::string_view::npos && text.size() >= close.size()) {
    tool_scan_ = std::max(tool_scan_, text.size() - close.size() + 1);
  }
  if (end != std::string_view::npos) {
    end += close.size();
    if (bare_function) {
      // A model that left out <tool_call> may still close it.
      const std::string_view after = text.substr(end);
      const std::string_view rest = detail::ltrim(after);
      if (!final && (rest.empty() || is_proper_prefix(rest, kToolCallClose))) return false;
      if (rest.substr(0, kToolCallClose.size()) == kToolCallClose) {
        end += after.size() - rest.size() + kToolCallClose.size();
      }
    }
  } else if (!final) {
    return false;
  }
  bool ok = false;
  std::vector<ToolCall> calls;
  if (end != std::string_view::npos) {
    const ToolCallFormat fmt = opts_.format.tools;
    if (fmt == ToolCallFormat::HERMES || fmt == ToolCallFormat::GLM45) {
      ToolCall call;
      const std::string_view body =
          text.substr(tool_open_.size(), end - close.size() - tool_open_.size());
      ok = fmt == ToolCallFormat::HERMES ? detail::parse_json_call(body, &call)
                                         : detail::parse_glm45_call(body, opts_.tools, &call);
      if (ok) calls.push_back(std::move(call));
    } else {
      std::string_view body = text.substr(0, end);
      if (!bare_function) {
        body = text.substr(tool_open_.size(), end - close.size() - tool_open_.size());
      } else if (body.size() >= kToolCallClose.size() &&
                 body.substr(body.size() - kToolCallClose.size()) == kToolCallClose) {
        body.remove_suffix(kToolCallClose.size());
      }
      ok = detail::parse_qwen3_coder_calls(body, opts_.tools, &calls);
    }
  } else {
    end = text.size();  // unclosed at the end of the reply
  }
  if (ok) {
    for (ToolCall& c : calls) add_tool_call(std::move(c), deltas);
  } else {
    add_content(text.substr(0, end), deltas);
  }
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
