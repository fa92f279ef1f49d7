// The output parser per format: reasoning, each tool-call syntax, several calls, content
// around calls, and malformed replies. Every case also runs in every split
// (check_split_invariance), since the streamed and the one-shot parse must agree.
#include <gtest/gtest.h>

#include "chat/chat_format.h"
#include "chat/chat_parse.h"
#include "parse_util.h"

namespace geist::chat {
namespace {

using ptest::check_split_invariance;

ParserOptions opts_for(ToolCallFormat tools, bool reasoning = false, bool starts = false) {
  ParserOptions o;
  o.format.tools = tools;
  o.format.reasoning = reasoning;
  o.starts_in_reasoning = starts;
  return o;
}

Json args_of(const ToolCall& c) { return Json::parse(c.arguments); }

TEST(ParseReasoning, ThinkBlockTrimmed) {
  const ChatMsg m = check_split_invariance("<think>\nLet me think.\n</think>\n\nThe answer is 4.",
                                           opts_for(ToolCallFormat::NONE, true));
  EXPECT_EQ(m.reasoning_content, "Let me think.");
  EXPECT_EQ(m.content, "The answer is 4.");
  EXPECT_TRUE(m.tool_calls.empty());
}

TEST(ParseReasoning, PromptOpenedBlock) {
  // Qwen3.5's generation prompt ends with "<think>\n": the reply starts inside the block.
  const ChatMsg m = check_split_invariance("Hmm, 2+2.\nIt is 4.\n</think>\n\n4",
                                           opts_for(ToolCallFormat::QWEN3_CODER, true, true));
  EXPECT_EQ(m.reasoning_content, "Hmm, 2+2.\nIt is 4.");
  EXPECT_EQ(m.content, "4");
}

TEST(ParseReasoning, UnterminatedStaysReasoning) {
  const ChatMsg m =
      check_split_invariance("<think>\nstill going </thi", opts_for(ToolCallFormat::NONE, true));
  EXPECT_EQ(m.reasoning_content, "still going </thi");
  EXPECT_EQ(m.content, "");
  const ChatMsg o =
      check_split_invariance("thinking\n", opts_for(ToolCallFormat::NONE, true, true));
  EXPECT_EQ(o.reasoning_content, "thinking");
}

TEST(ParseReasoning, EmptyBlockAndNoBlock) {
  const ChatMsg m = check_split_invariance("<think>\n\n</think>\n\nHi there",
                                           opts_for(ToolCallFormat::HERMES, true));
  EXPECT_EQ(m.reasoning_content, "");
  EXPECT_EQ(m.content, "Hi there");
  // A template without <think>: the tags are plain text.
  const ChatMsg n = check_split_invariance("<think>x</think>y", opts_for(ToolCallFormat::NONE));
  EXPECT_EQ(n.content, "<think>x</think>y");
  // Not at the start: content.
  const ChatMsg k = check_split_invariance("Sure <think>", opts_for(ToolCallFormat::NONE, true));
  EXPECT_EQ(k.content, "Sure <think>");
}

TEST(ParseReasoning, ToolCallEndsReasoningForQwen3Coder) {
  const ChatMsg m = check_split_invariance(
      "I should call it.\n<tool_call>\n<function=f>\n<parameter=a>\nx\n</parameter>\n</function>\n"
      "</tool_call>",
      opts_for(ToolCallFormat::QWEN3_CODER, true, true));
  EXPECT_EQ(m.reasoning_content, "I should call it.");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].name, "f");
}

TEST(ParseHermes, OneCallWithContentBefore) {
  const ChatMsg m = check_split_invariance(
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": "
      "\"Oslo\", \"days\": 3}}\n</tool_call>",
      opts_for(ToolCallFormat::HERMES));
  EXPECT_EQ(m.content, "Let me check.");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].name, "get_weather");
  EXPECT_EQ(args_of(m.tool_calls[0]), Json::parse(R"({"location": "Oslo", "days": 3})"));
  EXPECT_EQ(m.tool_calls[0].id.rfind("call_", 0), 0u);
  EXPECT_EQ(m.tool_calls[0].id.size(), 29u);
}

TEST(ParseHermes, SeveralCallsWithThinking) {
  const ChatMsg m = check_split_invariance(
      "<think>\nTwo cities.\n</think>\n\n<tool_call>\n{\"name\": \"w\", \"arguments\": {\"c\": "
      "\"A\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"w\", \"arguments\": {\"c\": \"B\"}}\n"
      "</tool_call>",
      opts_for(ToolCallFormat::HERMES, true));
  EXPECT_EQ(m.reasoning_content, "Two cities.");
  EXPECT_EQ(m.content, "");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(args_of(m.tool_calls[0]), Json::parse(R"({"c": "A"})"));
  EXPECT_EQ(args_of(m.tool_calls[1]), Json::parse(R"({"c": "B"})"));
  EXPECT_NE(m.tool_calls[0].id, m.tool_calls[1].id);
}

TEST(ParseHermes, ArgumentsAsStringAndId) {
  const ChatMsg m = check_split_invariance(
      "<tool_call>{\"id\": \"abc\", \"name\": \"add\", \"arguments\": \"{\\\"a\\\": "
      "2}\"}</tool_call>",
      opts_for(ToolCallFormat::HERMES));
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].id, "abc");
  EXPECT_EQ(args_of(m.tool_calls[0]), Json::parse(R"({"a": 2})"));
}

TEST(ParseHermes, MalformedBecomesContent) {
  const ToolCallFormat h = ToolCallFormat::HERMES;
  // Unclosed.
  ChatMsg m = check_split_invariance("Hi <tool_call>\n{\"name\": \"f\", \"argu", opts_for(h));
  EXPECT_EQ(m.content, "Hi <tool_call>\n{\"name\": \"f\", \"argu");
  EXPECT_TRUE(m.tool_calls.empty());
  // Bad JSON, then a good call: only the good one is a call.
  m = check_split_invariance(
      "<tool_call>{not json}</tool_call> then <tool_call>{\"name\": \"g\", \"arguments\": {}}"
      "</tool_call>",
      opts_for(h));
  EXPECT_EQ(m.content, "<tool_call>{not json}</tool_call> then");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].name, "g");
  // No name / arguments not an object.
  m = check_split_invariance("<tool_call>{\"arguments\": {}}</tool_call>", opts_for(h));
  EXPECT_EQ(m.content, "<tool_call>{\"arguments\": {}}</tool_call>");
  m = check_split_invariance("<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",
                             opts_for(h));
  EXPECT_TRUE(m.tool_calls.empty());
  // A partial marker at the very end is content.
  m = check_split_invariance("The tag is <tool_ca", opts_for(h));
  EXPECT_EQ(m.content, "The tag is <tool_ca");
}

TEST(ParseHermes, HoldsBackPartialMarker) {
  ChatParser p(opts_for(ToolCallFormat::HERMES));
  std::vector<ChatDelta> d;
  p.feed("Hello <tool", &d);
  EXPECT_EQ(p.message().content, "Hello");  // neither "<tool" nor the space before it
  p.feed("box> ok  ", &d);
  EXPECT_EQ(p.message().content, "Hello <toolbox> ok");
  p.finish(&d);
  EXPECT_EQ(p.message().content, "Hello <toolbox> ok  ");
}

Json weather_tools() {
  return Json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {
      "type": "object", "properties": {
        "s": {"type": "string"}, "n": {"type": "integer"}, "x": {"type": "number"},
        "b": {"type": "boolean"}, "o": {"type": "object"}, "a": {"type": "array"},
        "u": {"type": ["string", "null"]}, "q": {"anyOf": [{"type": "integer"}, {"type": "null"}]}
      }}}}])");
}

TEST(ParseQwen3Coder, TypesFromSchema) {
  ParserOptions o = opts_for(ToolCallFormat::QWEN3_CODER);
  o.tools = weather_tools();
  const ChatMsg m = check_split_invariance(
      "<tool_call>\n<function=f>\n<parameter=s>\n42\n</parameter>\n<parameter=n>\n7\n</parameter>\n"
      "<parameter=x>\n2.5\n</parameter>\n<parameter=b>\nTrue\n</parameter>\n<parameter=o>\n"
      "{\"k\": [1, 2]}\n</parameter>\n<parameter=a>\n[1, \"two\"]\n</parameter>\n<parameter=u>\n"
      "null\n</parameter>\n<parameter=q>\nnot a number\n</parameter>\n<parameter=extra>\n1\n"
      "</parameter>\n</function>\n</tool_call>",
      o);
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(args_of(m.tool_calls[0]), Json::parse(R"({"s": "42", "n": 7, "x": 2.5, "b": true,
      "o": {"k": [1, 2]}, "a": [1, "two"], "u": "null", "q": "not a number", "extra": "1"})"));
}

TEST(ParseQwen3Coder, MultilineValuesAndSeveralCalls) {
  const ChatMsg m = check_split_invariance(
      "I'll run two.\n\n<tool_call>\n<function=write>\n<parameter=path>\na.txt\n</parameter>\n"
      "<parameter=text>\nline 1\n\nline 2\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n"
      "<function=ls>\n</function>\n</tool_call>\n",
      opts_for(ToolCallFormat::QWEN3_CODER));
  EXPECT_EQ(m.content, "I'll run two.");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0].name, "write");
  EXPECT_EQ(args_of(m.tool_calls[0]),
            Json::parse(R"({"path": "a.txt", "text": "line 1\n\nline 2"})"));
  EXPECT_EQ(m.tool_calls[1].name, "ls");
  EXPECT_EQ(args_of(m.tool_calls[1]), Json::object());
}

TEST(ParseQwen3Coder, WithoutToolCallTag) {
  // Qwen3-Coder sometimes leaves out <tool_call> (llama.cpp accepts it).
  const ChatMsg m = check_split_invariance(
      "<function=f>\n<parameter=s>\nv\n</parameter>\n</function>\n</tool_call>\nDone.",
      opts_for(ToolCallFormat::QWEN3_CODER));
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(args_of(m.tool_calls[0]), Json::parse(R"({"s": "v"})"));
  EXPECT_EQ(m.content, "Done.");
}

TEST(ParseQwen3Coder, Malformed) {
  const ParserOptions o = opts_for(ToolCallFormat::QWEN3_CODER);
  // A call that began stays a call: the reply ending inside a text value closes it there.
  ChatMsg m = check_split_invariance("<tool_call>\n<function=f>\n<parameter=s>\nv\n", o);
  EXPECT_EQ(m.content, "");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments, R"({"s":"v"})");
  // Only </parameter> ends a value.
  m = check_split_invariance("<tool_call>\n<function=f>\n<parameter=s>\nv\n</tool_call>", o);
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(args_of(m.tool_calls[0]), Json::parse(R"({"s": "v\n</tool_call>"})"));
  // Text that is not a parameter ends the call; it is content.
  m = check_split_invariance("<tool_call>\n<function=f>\njunk</function></tool_call>", o);
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments, "{}");
  EXPECT_EQ(m.content, "junk</function></tool_call>");
  // A typed value the reply ends in goes back to content with its header.
  ParserOptions typed = o;
  typed.tools = Json::parse(R"([{"type": "function", "function": {"name": "f", "parameters":
      {"type": "object", "properties": {"n": {"type": "integer"}}}}}])");
  m = check_split_invariance("<tool_call>\n<function=f>\n<parameter=n>\n12", typed);
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments, "{}");
  EXPECT_EQ(m.content, "<parameter=n>\n12");
  // Before a call's name there is no call.
  m = check_split_invariance("<tool_call>\njunk\n</tool_call>", o);
  EXPECT_EQ(m.content, "<tool_call>\njunk\n</tool_call>");
  EXPECT_TRUE(m.tool_calls.empty());
  m = check_split_invariance("<tool_call></tool_call>", o);
  EXPECT_TRUE(m.tool_calls.empty());
  m = check_split_invariance("<tool_call>\n<function=>\n</function>", o);
  EXPECT_TRUE(m.tool_calls.empty());
}

TEST(ParseGlm45, ArgsTypedAndSeveralCalls) {
  ParserOptions o = opts_for(ToolCallFormat::GLM45, true);
  o.tools = weather_tools();
  const ChatMsg m = check_split_invariance(
      "<think>plan</think>\nOn it.\n<tool_call>f\n<arg_key>s</arg_key>\n<arg_value>12</arg_value>\n"
      "<arg_key>n</arg_key>\n<arg_value>12</arg_value>\n<arg_key>o</arg_key>\n<arg_value>{\"k\": "
      "1}</arg_value>\n</tool_call>\n<tool_call>g\n</tool_call>\n",
      o);
  EXPECT_EQ(m.reasoning_content, "plan");
  EXPECT_EQ(m.content, "On it.");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(args_of(m.tool_calls[0]), Json::parse(R"({"s": "12", "n": 12, "o": {"k": 1}})"));
  EXPECT_EQ(m.tool_calls[1].name, "g");
  EXPECT_EQ(args_of(m.tool_calls[1]), Json::object());
  // Malformed: a key without a value (the call has begun: it closes, the rest is content), an
  // empty name (no call).
  const ChatMsg k = check_split_invariance("<tool_call>f\n<arg_key>a</arg_key></tool_call>", o);
  ASSERT_EQ(k.tool_calls.size(), 1u);
  EXPECT_EQ(k.tool_calls[0].arguments, "{}");
  EXPECT_EQ(k.content, "<arg_key>a</arg_key></tool_call>");
  EXPECT_TRUE(check_split_invariance("<tool_call>\n</tool_call>", o).tool_calls.empty());
}

TEST(ParseLlama3, BareJson) {
  const ChatMsg m = check_split_invariance(
      "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Oslo\"}}",
      opts_for(ToolCallFormat::LLAMA3_JSON));
  EXPECT_EQ(m.content, "");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].name, "get_weather");
  EXPECT_EQ(args_of(m.tool_calls[0]), Json::parse(R"({"location": "Oslo"})"));
}

TEST(ParseLlama3, PythonTagTypeAndSeveral) {
  const ChatMsg m = check_split_invariance(
      "<|python_tag|>{\"type\": \"function\", \"name\": \"a\", \"parameters\": {\"x\": 1}}; "
      "{\"name\": \"b\", \"parameters\": {}}",
      opts_for(ToolCallFormat::LLAMA3_JSON));
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0].name, "a");
  EXPECT_EQ(args_of(m.tool_calls[0]), Json::parse(R"({"x": 1})"));
  EXPECT_EQ(m.tool_calls[1].name, "b");
}

TEST(ParseLlama3, PlainRepliesStayContent) {
  const ParserOptions o = opts_for(ToolCallFormat::LLAMA3_JSON);
  EXPECT_EQ(check_split_invariance("It is sunny {\"name\": 1}", o).content,
            "It is sunny {\"name\": 1}");
  EXPECT_EQ(check_split_invariance("{\"answer\": 42}", o).content, "{\"answer\": 42}");
  // A call whose arguments began stays a call, closed where the reply ends.
  const ChatMsg open = check_split_invariance("{\"name\": \"x\", \"parameters\": {", o);
  EXPECT_EQ(open.content, "");
  ASSERT_EQ(open.tool_calls.size(), 1u);
  EXPECT_EQ(open.tool_calls[0].arguments, "{}");
  EXPECT_EQ(check_split_invariance("{\"name\": 5}", o).content, "{\"name\": 5}");
  EXPECT_EQ(check_split_invariance("{", o).content, "{");
  const ChatMsg m = check_split_invariance("{\"name\": \"f\", \"parameters\": {}}\nCalled it.", o);
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.content, "Called it.");
}

TEST(ParseContent, NoFormatAndUtf8) {
  const ChatMsg m =
      check_split_invariance("Grüße, 世界! 🚀 <tool_call> stays", opts_for(ToolCallFormat::NONE));
  EXPECT_EQ(m.content, "Grüße, 世界! 🚀 <tool_call> stays");
  const ChatMsg e = check_split_invariance("", opts_for(ToolCallFormat::HERMES, true));
  EXPECT_EQ(e.content, "");
  EXPECT_EQ(e.reasoning_content, "");
}

TEST(ParseContent, FeedAfterFinishIgnored) {
  ChatParser p(opts_for(ToolCallFormat::NONE));
  std::vector<ChatDelta> d;
  p.feed("a", &d);
  p.finish(&d);
  p.feed("b", &d);
  p.finish(&d);
  EXPECT_EQ(p.message().content, "a");
  EXPECT_TRUE(p.finished());
}

TEST(ParseFuzz, RandomBytesNeverThrowAndAgree) {
  std::mt19937 rng(99);
  const std::vector<std::string> atoms = {"<tool_call>",
                                          "</tool_call>",
                                          "<function=f>",
                                          "</function>",
                                          "<parameter=p>",
                                          "</parameter>",
                                          "<think>",
                                          "</think>",
                                          "{\"name\": \"f\", ",
                                          "\"arguments\": {",
                                          "\"parameters\": {",
                                          "}",
                                          "{",
                                          ";",
                                          "\n",
                                          " ",
                                          "x",
                                          "\"",
                                          "\\",
                                          "<|python_tag|>",
                                          "<",
                                          "\xE4\xB8",
                                          "\x96",
                                          "<arg_key>",
                                          "</arg_key>",
                                          "<arg_value>",
                                          "</arg_value>"};
  for (int iter = 0; iter < 300; ++iter) {
    std::string text;
    const int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) text += atoms[rng() % atoms.size()];
    for (ToolCallFormat f :
         {ToolCallFormat::NONE, ToolCallFormat::HERMES, ToolCallFormat::QWEN3_CODER,
          ToolCallFormat::LLAMA3_JSON, ToolCallFormat::GLM45}) {
      ParserOptions o = opts_for(f, rng() % 2 == 0, rng() % 3 == 0);
      o.id_seed = 5;
      const ChatMsg whole = parse_chat_output(text, o);
      std::mt19937 split_rng(static_cast<unsigned>(iter));
      const ptest::StreamRun r = ptest::run_pieces(ptest::split_random(text, &split_rng), o);
      EXPECT_TRUE(ptest::same_msg(r.final, whole)) << text;
      // Nothing emitted is taken back, so even malformed replies stream what the final result
      // says.
      EXPECT_TRUE(ptest::same_msg(r.from_deltas, whole)) << text;
    }
  }
}

TEST(DetectFormat, Markers) {
  EXPECT_EQ(detect_chat_format("{{ '<tool_call>\\n<function=' }}<parameter=").tools,
            ToolCallFormat::QWEN3_CODER);
  EXPECT_EQ(detect_chat_format("<tool_call>").tools, ToolCallFormat::HERMES);
  EXPECT_EQ(detect_chat_format("<|python_tag|>").tools, ToolCallFormat::LLAMA3_JSON);
  EXPECT_EQ(detect_chat_format("\"parameters\" <|eot_id|>").tools, ToolCallFormat::LLAMA3_JSON);
  EXPECT_EQ(detect_chat_format("<|eot_id|>").tools, ToolCallFormat::NONE);
  EXPECT_EQ(detect_chat_format("<tool_call>{{ name }}<arg_key>").tools, ToolCallFormat::GLM45);
  EXPECT_EQ(detect_chat_format("<seed:tool_call><function=x><parameter=").tools,
            ToolCallFormat::NONE);
  EXPECT_TRUE(detect_chat_format("<think>").reasoning);
  EXPECT_FALSE(detect_chat_format("<tool_call>").reasoning);
  EXPECT_STREQ(tool_call_format_name(ToolCallFormat::QWEN3_CODER), "qwen3_coder");
}

TEST(DetectFormat, PromptOpensReasoning) {
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
}

}  // namespace
}  // namespace geist::chat
