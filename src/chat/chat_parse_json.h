// The parser's results in OpenAI chat-completions form, for the server's replies and for a
// conversation's history (the Jinja renderer reads the same message shape).
#pragma once

#include "chat/chat_parse.h"

namespace geist::chat {

// {"role": "assistant", "content": ..., "reasoning_content": ... (only when non-empty),
//  "tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}] (only when
//  there are calls)}. content is null when it is empty and there are calls, as OpenAI sends it.
// Strings are copied as they are: dump with Json::error_handler_t::replace if they may hold
// invalid UTF-8 (a model's bytes are not checked here).
Json chat_msg_to_json(const ChatMsg& msg);

// A streaming chunk's "delta" object for one ChatDelta:
//   CONTENT         {"content": text}
//   REASONING       {"reasoning_content": text}
//   TOOL_CALL_BEGIN {"tool_calls": [{"index", "id", "type": "function",
//                                    "function": {"name", "arguments": ""}}]}
//   TOOL_CALL_ARGS  {"tool_calls": [{"index", "function": {"arguments": text}}]}
Json chat_delta_to_json(const ChatDelta& delta);

}  // namespace geist::chat
