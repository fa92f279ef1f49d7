// Incremental JSON reader that re-emits what it reads as compact JSON as soon as it is decided,
// for tool-call arguments streamed while the model writes them (chat_parse_stream.cpp).
//
// Fed the text of one JSON value in any split, it appends compact JSON to *out so that what has
// been emitted is always a prefix of the compact form of the value read so far, and can always
// be closed into valid JSON by close_suffix(): separators and keys wait for the value after
// them, numbers and literals for their end, escapes and UTF-8 sequences until whole; string
// values stream character by character. Nothing emitted is ever taken back. Invalid JSON stops
// it (ERROR) at the offending byte. Knows nothing of chat formats.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace geist::chat {

class JsonStream {
 public:
  enum class Result { MORE, DONE, ERROR };
  static constexpr size_t kMaxDepth = 256;

  // Reads a value; when `object_only` the value must be an object (a tool call's arguments).
  explicit JsonStream(bool object_only = true) : object_only_(object_only) {}
  // Reads the rest of an object whose opening brace and a first member were already read
  // elsewhere: expects ',' or '}' next. Emits nothing (for the tail of {"name", "arguments"}).
  static JsonStream object_tail();

  // Consumes text up to the end of the value (DONE; *consumed includes the closing byte), to
  // the end of `text` (MORE), or to the first byte that cannot continue the value (ERROR;
  // *consumed stops before it). After DONE or ERROR it consumes nothing more.
  Result feed(std::string_view text, size_t* consumed, std::string* out);
  // The end of the input: a number that ends the text is complete; emits it.
  void finish(std::string* out);

  // What closes the emitted prefix into valid JSON ("" when DONE): the open string's quote,
  // then the open containers' brackets.
  std::string close_suffix() const;
  // The bytes consumed but not represented in the output (a key waiting for its value, a
  // partial number, whitespace): what a caller that gives up on the value gives back.
  const std::string& held() const { return held_raw_; }
  bool done() const { return state_ == State::DONE; }

 private:
  enum class State {
    VALUE,         // a value (after ':' or ',' in an array, or at the start)
    VALUE_OR_END,  // after '[': a value or ']'
    KEY_OR_END,    // after '{': a key or '}'
    KEY,           // after ',' in an object
    COLON,         // after a key
    COMMA_OR_END,  // after a member or element
    STRING,        // inside a string (key_ says which kind)
    NUMBER,        // inside a number
    LITERAL,       // inside true / false / null
    DONE,
  };

  bool step(char c, std::string* out);  // false: c cannot continue the value
  bool start_value(char c, std::string* out);
  bool string_char(char c, std::string* out);
  void value_done();
  bool end_number(std::string* out);
  void emit(std::string_view text, std::string* out);

  bool object_only_;
  State state_ = State::VALUE;
  bool error_ = false;       // stopped at a byte that cannot continue the value (state_ kept)
  std::vector<char> stack_;  // open containers: '{' or '['
  bool key_ = false;         // STRING: a key (buffered in pending_) or a value (streamed)
  std::string pending_;      // compact text decided but not emitted: ",", "\"key\":"
  std::string token_;        // NUMBER / LITERAL / an escape or UTF-8 sequence in a STRING
  size_t utf8_need_ = 0;     // STRING: continuation bytes still to come
  std::string held_raw_;     // input since the last emit
};

}  // namespace geist::chat
