// Incremental parser of a model's reply: content, reasoning (<think>...</think>) and tool calls
// in the syntax of a ChatFormat. Works on decoded text; knows nothing of models or tokens.
//
// Fed the reply's text pieces as they stream, it emits deltas and never emits a partial
// marker: text that may be the start of a tag ("<tool", "</thi") is held back until the next
// pieces decide it, and so is trailing whitespace the final result may trim and an incomplete
// UTF-8 sequence. Tool calls stream as OpenAI streams them: a call's begin delta (index, id,
// name) once its name is read, then fragments of its arguments JSON text as they are decided
// (JSON arguments re-emitted compactly token by token, string values character by character;
// an XML parameter once its value is closed, a text-typed one character by character), so that
// the fragments concatenated are the call's final arguments. Nothing emitted is taken back.
// Feeding the same text in any split gives the same deltas concatenated and the same final
// result.
//
// Malformed output never fails, and loses no text. Before a call's name is read, a layout that
// cannot be streamed (arguments before the name, arguments as a JSON string, an "id" key) waits
// for its closing tag and is parsed whole; an unclosed or unparsable one becomes content, as
// llama.cpp does. Once a call has begun it stays a call: where its text stops being valid (bad
// JSON, the reply ends inside it) its arguments are closed into valid JSON (the open string and
// containers closed) and the rest of the text becomes content. No exception escapes.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_format.h"
#include "chat/json_stream.h"

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
  enum class State {
    START,
    REASONING,
    CONTENT,
    TOOL,         // after a call's opening marker, until its name is read (or it is parsed whole)
    LLAMA_JSON,   // a Llama 3 JSON call may start here
    LLAMA_AFTER,  // after a Llama 3 call: ';' or the end
    ARGS_JSON,    // a streamed call's JSON arguments
    ARGS_TAIL,    // after them: the rest of the call object, then its closing marker
    ARGS_XML,     // a streamed call's XML parameters (Qwen3-Coder, GLM-4.5)
    XML_NEXT,     // after </function>: </tool_call>, another <function=, or content
  };
  enum class Header { MORE, NO, MATCH };

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
  // A streamed call: its begin delta, then fragments of its arguments.
  void begin_call(std::string name, std::vector<ChatDelta>* deltas);
  void add_args(std::string_view text, std::vector<ChatDelta>* deltas);

  // chat_parse_stream.cpp: the streamed calls.
  Header start_json_call(std::string_view text, size_t text_at, bool final,
                         std::vector<ChatDelta>* deltas);
  Header start_xml_call(std::string_view text, size_t text_at, bool final,
                        std::vector<ChatDelta>* deltas);
  bool step_args_json(bool final, std::vector<ChatDelta>* deltas);
  bool step_args_tail(bool final);
  bool step_args_xml(bool final, std::vector<ChatDelta>* deltas);
  bool step_xml_value(bool final, std::vector<ChatDelta>* deltas);
  bool step_xml_next(bool final);
  void close_xml_call(std::vector<ChatDelta>* deltas);
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
  bool tool_whole_ = false;      // TOOL: not streamable; parsed whole at its close marker
  // ARGS_JSON: the arguments; ARGS_TAIL: the rest of the call object (until tail_done_).
  JsonStream args_json_;
  bool tail_done_ = false;
  std::string_view call_close_;  // ARGS_TAIL: the marker that ends the call ("" for Llama 3)
  // ARGS_XML: the current call's parameters.
  bool xml_first_ = true;      // no parameter emitted yet
  bool xml_in_value_ = false;  // inside a value (after its parameter's header)
  bool xml_text_ = false;      // that value is text: streamed as a JSON string
  bool xml_started_ = false;   // the text value's opening quote was emitted
  std::string xml_key_;        // the parameter's name
  std::string xml_header_;     // the parameter's header text (given back if the call breaks)
  size_t xml_scan_ = 0;        // where the search for the value's close resumes
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
