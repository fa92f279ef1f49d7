// Which reasoning and tool-call syntax a model's replies use, decided from its chat template.
#pragma once

#include <string_view>

namespace geist::chat {

enum class ToolCallFormat {
  NONE,         // no tool calls: the whole reply is content
  HERMES,       // <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> (Qwen2.5, Qwen3,
                // Hermes 2 Pro / 3, QwQ)
  QWEN3_CODER,  // <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...
                // </function>\n</tool_call> (Qwen3-Coder, Qwen3.5)
  LLAMA3_JSON,  // the reply is {"name": ..., "parameters": {...}}, optionally after
                // <|python_tag|>; several separated by ';' (Llama 3.1 / 3.2 / 3.3)
  GLM45,        // <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n...
                // </tool_call> (GLM-4.5 / 4.6, Poolside Laguna)
};

struct ChatFormat {
  ToolCallFormat tools = ToolCallFormat::NONE;
  bool reasoning = false;  // <think>...</think> goes to reasoning_content
};

// Detects the format from the template's source text by its markers: "<tool_call>" with
// "<function=" and "<parameter=" -> QWEN3_CODER; "<tool_call>" with "<arg_key>" -> GLM45;
// "<tool_call>" -> HERMES; else "<|python_tag|>", or "\"parameters\"" together with
// "<|eot_id|>", and no "<function=" (Functionary's syntax) -> LLAMA3_JSON; else NONE (also
// for syntaxes not parsed yet: Seed-OSS's <seed:tool_call>, Apriel's <tool_calls>[...]).
// reasoning: the source contains "<think>". Never fails.
ChatFormat detect_chat_format(std::string_view template_source);

// "none", "hermes", "qwen3_coder", "llama3_json".
const char* tool_call_format_name(ToolCallFormat format);

// Whether a rendered prompt leaves a <think> block open for the model (Qwen3.5 and others end
// the generation prompt with "<think>\n"): its last "<think>" is followed by whitespace only.
// Pass the result as ParserOptions::starts_in_reasoning.
bool prompt_opens_reasoning(std::string_view prompt);

}  // namespace geist::chat
