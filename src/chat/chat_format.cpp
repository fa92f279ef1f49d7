#include "chat/chat_format.h"

namespace geist::chat {
namespace {

bool has(std::string_view s, std::string_view what) { return s.find(what) != s.npos; }

}  // namespace

ChatFormat detect_chat_format(std::string_view src) {
  ChatFormat f;
  f.reasoning = has(src, "<think>");
  if (has(src, "<tool_call>")) {
    if (has(src, "<function=") && has(src, "<parameter=")) {
      f.tools = ToolCallFormat::QWEN3_CODER;
    } else if (has(src, "<arg_key>")) {
      f.tools = ToolCallFormat::GLM45;
    } else {
      f.tools = ToolCallFormat::HERMES;
    }
  } else if (!has(src, "<function=") && (has(src, "<|python_tag|>") ||
                                         (has(src, "\"parameters\"") && has(src, "<|eot_id|>")))) {
    f.tools = ToolCallFormat::LLAMA3_JSON;
  }
  return f;
}

const char* tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::NONE:
      return "none";
    case ToolCallFormat::HERMES:
      return "hermes";
    case ToolCallFormat::QWEN3_CODER:
      return "qwen3_coder";
    case ToolCallFormat::LLAMA3_JSON:
      return "llama3_json";
    case ToolCallFormat::GLM45:
      return "glm45";
  }
  return "none";
}

bool prompt_opens_reasoning(std::string_view prompt) {
  const size_t p = prompt.rfind("<think>");
  if (p == prompt.npos) return false;
  for (char c : prompt.substr(p + 7)) {
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return false;
  }
  return true;
}

}  // namespace geist::chat
