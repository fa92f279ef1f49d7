// Incremental parser of a model's reply: content, reasoning (<think>...</think>) and tool calls
// in the syntax of a ChatFormat. Works on decoded text; knows nothing of models or tokens.
//
// Fed the reply's text pieces as they stream, it emits deltas and never emits a partial
// marker: text that may be the start of a tag ("<tool", "</thi") is held back until the next
// pieces decide it, and so is trailing whitespace the final result may trim and an incomplete
// UTF-8 sequence. A tool call is emitted whole (its begin delta, then its complete arguments as
// one fragment) once its closing tag is read and it parses. Feeding the same text in any split
// gives the same deltas concatenated and the same final result.
//
// Malformed output (an unclosed tool call, bad JSON, an unknown layout) never fails: the text
// becomes content, as llama.cpp does. No exception escapes.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_format.h"

namespace geist::chat {

using Json = nlohmann::ordered_json;

struct ToolCall {
  std::string id;  // from the reply when the format carries one, else "call_" + 24 alnum
  std::string name;
  std::string arguments;  // JSON text of an object (compact)
};

struct ChatMsg {
  // The text outside reasoning and calls. Whitespace after </think> and around calls is
  // dropped; at the end of the reply it is kept.
  std::string content;
  std::string reasoning_content;  // whitespace-trimmed
  std::vector<ToolCall> tool_calls;
};

struct ChatDelta {
  enum class Kind {
    CONTENT,          // text: more content
    REASONING,        // text: more reasoning_content
    TOOL_CALL_BEGIN,  // index, id, name: tool call `index` starts
    TOOL_CALL_ARGS,   // index, text: more of that call's arguments JSON text
  };
  Kind kind = Kind::CONTENT;
  std::string text;
  int index = -1;
  std::string id, name;
};

struct ParserOptions {
  ChatFormat format;
  // The prompt already opened the think block (prompt_opens_reasoning): the reply starts as
  // reasoning_content until </think>.
  bool starts_in_reasoning = false;
  // The request's tools in OpenAI form ([{"type": "function", "function": {"name",
  // "parameters"}}]); QWEN3_CODER and GLM45 convert each parameter's text by the type its JSON
  // schema gives (string stays text; number, integer, boolean, object, array, null parse as JSON,
  // falling back to the text). A parameter without a schema stays a string. Not needed by the other
  // formats.
  Json tools = Json::array();
  // Seed for generated tool-call ids; 0 draws one from std::random_device.
  uint64_t id_seed = 0;
};

class ChatParser {
 public:
  explicit ChatParser(ParserOptions opts);

  // Appends the next piece of the reply; appends what it decides to *deltas. Not thread-safe.
  void feed(std::string_view piece, std::vector<ChatDelta>* deltas);
  // The end of the reply: decides whatever was held back and appends the last deltas; an open
  // <think> block stays reasoning, an unclosed tool call becomes content. Later feeds are
  // ignored.
  void finish(std::vector<ChatDelta>* deltas);

  // What was emitted so far (held-back text is not in it); after finish, the final result.
  const ChatMsg& message() const { return msg_; }
  bool finished() const { return finished_; }

 private:
  enum class State { START, REASONING, CONTENT, TOOL, LLAMA_JSON, LLAMA_AFTER };

  // One step on buf_: true when it consumed text or changed state, false when it needs more
  // text (when final: when nothing is left to decide).
  bool step(bool final, std::vector<ChatDelta>* deltas);
  bool step_start(bool final);
  bool step_reasoning(bool final, std::vector<ChatDelta>* deltas);
  bool step_content(bool final, std::vector<ChatDelta>* deltas);
  bool step_tool(bool final, std::vector<ChatDelta>* deltas);
  bool step_llama_json(bool final, std::vector<ChatDelta>* deltas);

  void add_reasoning(std::string_view text, std::vector<ChatDelta>* deltas);
  // Content text; its trailing whitespace is held until more content follows.
  void add_content(std::string_view text, std::vector<ChatDelta>* deltas);
  void flush_content_ws(std::vector<ChatDelta>* deltas);
  void add_tool_call(ToolCall call, std::vector<ChatDelta>* deltas);
  std::string new_call_id();
  void run(bool final, std::vector<ChatDelta>* deltas);

  ParserOptions opts_;
  std::mt19937_64 rng_;
  State state_ = State::START;
  std::string buf_;              // text fed and not yet decided
  std::string reasoning_ws_;     // whitespace held inside reasoning (dropped if it ends the block)
  std::string content_ws_;       // whitespace held at the end of content (dropped before a call)
  bool content_lstrip_ = false;  // drop whitespace at the start of the next content
  std::string tool_open_;        // the marker that opened the current tool call
  size_t tool_scan_ = 0;         // TOOL: where the search for its close marker resumes
  // Where a JSON object that starts at text[0] == '{' ends, found resumably as the text grows
  // (same start). Tracks strings and escapes only; the parse that follows checks validity.
  struct JsonScan {
    size_t pos = 0;  // bytes of text already scanned
    int depth = 0;
    bool in_string = false, escaped = false;
    bool broken = false;  // closed more than it opened: never ends as an object
    // Length through the closing brace, or npos while the text ends first (or when broken).
    size_t advance(std::string_view text);
  };
  JsonScan json_scan_;       // LLAMA_JSON: the current object
  bool reply_start_ = true;  // no content or call yet (LLAMA3_JSON: a '{' may open a call)
  ChatMsg msg_;
  bool finished_ = false;
};

// One-shot parse of a whole reply (a ChatParser fed once and finished).
ChatMsg parse_chat_output(std::string_view text, const ParserOptions& opts);

}  // namespace geist::chat
