// Shared pieces of the output parser (chat_parse.cpp, chat_parse_stream.cpp): markers, text
// helpers, a JSON call parsed whole, parameter types from the request's tools.
// Internal to the chat layer.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_parse.h"

namespace geist::chat::detail {

namespace markers {
inline constexpr std::string_view kThinkOpen = "<think>";
inline constexpr std::string_view kThinkClose = "</think>";
inline constexpr std::string_view kToolCallOpen = "<tool_call>";
inline constexpr std::string_view kToolCallClose = "</tool_call>";
inline constexpr std::string_view kFunctionOpen = "<function=";
inline constexpr std::string_view kFunctionClose = "</function>";
inline constexpr std::string_view kParameterOpen = "<parameter=";
inline constexpr std::string_view kParameterClose = "</parameter>";
inline constexpr std::string_view kArgKeyOpen = "<arg_key>";
inline constexpr std::string_view kArgKeyClose = "</arg_key>";
inline constexpr std::string_view kArgValueOpen = "<arg_value>";
inline constexpr std::string_view kArgValueClose = "</arg_value>";
inline constexpr std::string_view kPythonTag = "<|python_tag|>";
}  // namespace markers

inline bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
std::string_view trim(std::string_view s);
std::string_view ltrim(std::string_view s);

// Length of the longest suffix of `text` that is a proper prefix of one of `markers`.
size_t partial_marker_len(std::string_view text, const std::vector<std::string_view>& markers);
// The earliest of `markers` in text: its position (npos if none) and, in *which, its index.
size_t find_first_marker(std::string_view text, const std::vector<std::string_view>& markers,
                         size_t* which);
bool is_proper_prefix(std::string_view text, std::string_view of);

// Compact JSON text, invalid UTF-8 replaced (never throws on strings).
std::string dump_json(const Json& value);

// The JSON schema of parameter `param` of function `function` in the request's tools, or null.
const Json* param_schema(const Json& tools, std::string_view function, std::string_view param);
// Whether a parameter of that schema stays text (no schema, or "string" among its types).
bool param_is_text(const Json* schema);
// A parameter's text converted by its schema: text when param_is_text, else parsed as JSON
// (a boolean also case-insensitively), falling back to the text.
Json convert_param(const std::string& value, const Json* schema);

// {"name": ..., "arguments": {...}} (or "parameters"; arguments given as a JSON string are
// accepted). Fills out->name, arguments and, when the object has a string "id", id. False when
// the text is not such an object.
bool parse_json_call(std::string_view text, ToolCall* out);

}  // namespace geist::chat::detail
