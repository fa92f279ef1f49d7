// Tool-call bodies of each format, parsed once their closing tag is read (chat_parse.cpp).
// Internal to the chat layer.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_parse.h"

namespace geist::chat::detail {

inline bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
std::string_view trim(std::string_view s);
std::string_view ltrim(std::string_view s);

// Compact JSON text, invalid UTF-8 replaced (never throws on strings).
std::string dump_json(const Json& value);

// {"name": ..., "arguments": {...}} (or "parameters"; arguments given as a JSON string are
// accepted). Fills out->name, arguments and, when the object has a string "id", id. False when
// the text is not such an object.
bool parse_json_call(std::string_view text, ToolCall* out);

// One or more <function=NAME> <parameter=P>VALUE</parameter>... </function> blocks with only
// whitespace between them; a last block may lack </function>. Values lose one leading and one
// trailing newline and are converted by the parameter's schema in `tools`. False when
// malformed (then *out is unchanged).
bool parse_qwen3_coder_calls(std::string_view body, const Json& tools, std::vector<ToolCall>* out);

// The body of one GLM-4.5 call (between <tool_call> and </tool_call>): the function name up
// to the first newline or '<', then <arg_key>K</arg_key> <arg_value>V</arg_value> pairs with
// whitespace between; values are converted by the schema as for Qwen3-Coder (no newline is
// stripped). False when malformed.
bool parse_glm45_call(std::string_view body, const Json& tools, ToolCall* out);

}  // namespace geist::chat::detail
