// The parser's results as OpenAI chat-completions JSON.
#include <gtest/gtest.h>

#include "chat/chat_parse_json.h"

namespace geist::chat {
namespace {

TEST(ParseJson, Message) {
  ChatMsg m;
  m.content = "Hi";
  EXPECT_EQ(chat_msg_to_json(m), Json::parse(R"({"role": "assistant", "content": "Hi"})"));
  m.content.clear();
  m.reasoning_content = "r";
  m.tool_calls.push_back(ToolCall{"call_1", "f", R"({"a":1})"});
  EXPECT_EQ(chat_msg_to_json(m), Json::parse(R"({"role": "assistant", "content": null,
      "reasoning_content": "r", "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "f", "arguments": "{\"a\":1}"}}]})"));
}

TEST(ParseJson, Deltas) {
  ChatParser p([] {
    ParserOptions o;
    o.format.tools = ToolCallFormat::HERMES;
    o.id_seed = 3;
    return o;
  }());
  std::vector<ChatDelta> d;
  p.feed("Ok <tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>", &d);
  p.finish(&d);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(chat_delta_to_json(d[0]), Json::parse(R"({"content": "Ok"})"));
  const Json begin = chat_delta_to_json(d[1]);
  EXPECT_EQ(begin["tool_calls"][0]["index"], 0);
  EXPECT_EQ(begin["tool_calls"][0]["id"], p.message().tool_calls[0].id);
  EXPECT_EQ(begin["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(
      chat_delta_to_json(d[2]),
      Json::parse(R"({"tool_calls": [{"index": 0, "function": {"arguments": "{\"a\":1}"}}]})"));
}

}  // namespace
}  // namespace geist::chat
