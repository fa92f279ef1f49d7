#include "chat/chat_parse_json.h"

namespace geist::chat {

Json chat_msg_to_json(const ChatMsg& msg) {
  Json out = Json::object();
  out["role"] = "assistant";
  if (msg.content.empty() && !msg.tool_calls.empty()) {
    out["content"] = nullptr;
  } else {
    out["content"] = msg.content;
  }
  if (!msg.reasoning_content.empty()) out["reasoning_content"] = msg.reasoning_content;
  if (!msg.tool_calls.empty()) {
    Json calls = Json::array();
    for (const ToolCall& c : msg.tool_calls) {
      Json call = Json::object();
      call["id"] = c.id;
      call["type"] = "function";
      call["function"] = Json{{"name", c.name}, {"arguments", c.arguments}};
      calls.push_back(std::move(call));
    }
    out["tool_calls"] = std::move(calls);
  }
  return out;
}

Json chat_delta_to_json(const ChatDelta& d) {
  Json out = Json::object();
  switch (d.kind) {
    case ChatDelta::Kind::CONTENT:
      out["content"] = d.text;
      break;
    case ChatDelta::Kind::REASONING:
      out["reasoning_content"] = d.text;
      break;
    case ChatDelta::Kind::TOOL_CALL_BEGIN: {
      Json call = Json::object();
      call["index"] = d.index;
      call["id"] = d.id;
      call["type"] = "function";
      call["function"] = Json{{"name", d.name}, {"arguments", ""}};
      out["tool_calls"] = Json::array({std::move(call)});
      break;
    }
    case ChatDelta::Kind::TOOL_CALL_ARGS: {
      Json call = Json::object();
      call["index"] = d.index;
      call["function"] = Json{{"arguments", d.text}};
      out["tool_calls"] = Json::array({std::move(call)});
      break;
    }
  }
  return out;
}

}  // namespace geist::chat
