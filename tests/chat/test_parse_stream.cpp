// Tool-call arguments stream as they form: for every format, a reply fed one byte at a time
// and in random pieces gives the begin delta and argument fragments before the call's closing
// marker arrives, the fragments concatenated are exactly the arguments string of the
// whole-message parse, and that string is the JSON the reply's text encodes (written out by
// hand below from the reply, not from the parser).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "chat/chat_parse.h"
#include "parse_util.h"

namespace geist::chat {
namespace {

struct Recorded {
  std::vector<ChatDelta> deltas;
  std::vector<size_t> at;  // [deltas.size()] bytes fed when each delta came out
  ChatMsg final;
};

Recorded feed_pieces(const std::vector<std::string>& pieces, const ParserOptions& opts) {
  Recorded r;
  ChatParser p(opts);
  size_t fed = 0;
  for (const std::string& piece : pieces) {
    fed += piece.size();
    const size_t before = r.deltas.size();
    p.feed(piece, &r.deltas);
    r.at.resize(r.deltas.size(), fed);
    (void)before;
  }
  p.finish(&r.deltas);
  r.at.resize(r.deltas.size(), fed);
  r.final = p.message();
  return r;
}

// The arguments each call's fragments add up to, in call order.
std::vector<std::string> args_from_deltas(const Recorded& r) {
  std::vector<std::string> args;
  for (const ChatDelta& d : r.deltas) {
    if (d.kind == ChatDelta::Kind::TOOL_CALL_BEGIN) args.emplace_back();
    if (d.kind == ChatDelta::Kind::TOOL_CALL_ARGS) {
      EXPECT_EQ(d.index + 1, static_cast<int>(args.size()));
      if (!args.empty()) args.back() += d.text;
    }
  }
  return args;
}

// The arguments text call `index` had received once `bytes` of the reply were fed.
std::string args_before(const Recorded& r, int index, size_t bytes) {
  std::string s;
  for (size_t i = 0; i < r.deltas.size(); ++i) {
    const ChatDelta& d = r.deltas[i];
    if (r.at[i] <= bytes && d.kind == ChatDelta::Kind::TOOL_CALL_ARGS && d.index == index) {
      s += d.text;
    }
  }
  return s;
}

bool begun_before(const Recorded& r, int index, size_t bytes) {
  for (size_t i = 0; i < r.deltas.size(); ++i) {
    if (r.at[i] <= bytes && r.deltas[i].kind == ChatDelta::Kind::TOOL_CALL_BEGIN &&
        r.deltas[i].index == index) {
      return true;
    }
  }
  return false;
}

struct Case {
  const char* label;
  ToolCallFormat format;
  std::string text;
  std::vector<std::string> names;
  std::vector<std::string> args_json;  // expected arguments, as JSON values
  // For each call: the text the call's closing marker starts with, and a string its arguments
  // must have received before that marker was fed (a whole first parameter, or a part of a
  // long value).
  std::vector<std::string> closes;
  std::vector<std::string> early;
};

ChatMsg check_case(const Case& c, const ParserOptions& opts) {
  SCOPED_TRACE(c.label);
  const ChatMsg whole = parse_chat_output(c.text, opts);
  if (whole.tool_calls.size() != c.names.size()) {
    ADD_FAILURE() << ptest::describe(whole);
    return whole;
  }
  for (size_t i = 0; i < c.names.size(); ++i) {
    EXPECT_EQ(whole.tool_calls[i].name, c.names[i]);
    const Json got = Json::parse(whole.tool_calls[i].arguments, nullptr, false);
    EXPECT_FALSE(got.is_discarded()) << whole.tool_calls[i].arguments;
    EXPECT_EQ(got, Json::parse(c.args_json[i])) << whole.tool_calls[i].arguments;
  }
  std::vector<std::vector<std::string>> splits = {ptest::split_chars(c.text)};
  std::mt19937 rng(11);
  for (int i = 0; i < 12; ++i) splits.push_back(ptest::split_random(c.text, &rng));
  for (size_t s = 0; s < splits.size(); ++s) {
    SCOPED_TRACE(s == 0 ? "byte by byte" : "random pieces");
    const Recorded r = feed_pieces(splits[s], opts);
    const std::vector<std::string> args = args_from_deltas(r);
    if (args.size() != whole.tool_calls.size() ||
        r.final.tool_calls.size() != whole.tool_calls.size()) {
      ADD_FAILURE() << "split " << s << ": " << ptest::describe(r.final);
      continue;
    }
    for (size_t i = 0; i < args.size(); ++i) {
      EXPECT_EQ(args[i], whole.tool_calls[i].arguments);  // byte for byte
      EXPECT_EQ(r.final.tool_calls[i].arguments, whole.tool_calls[i].arguments);
    }
    EXPECT_EQ(r.final.content, whole.content);
    if (s != 0) continue;
    // Byte by byte: what had arrived when the call's closing marker began.
    size_t from = 0;
    for (size_t i = 0; i < c.closes.size(); ++i) {
      const size_t close_at = c.text.find(c.closes[i], from);
      if (close_at == std::string::npos) {
        ADD_FAILURE() << "no " << c.closes[i];
        break;
      }
      from = close_at + 1;
      EXPECT_TRUE(begun_before(r, static_cast<int>(i), close_at)) << "call " << i;
      const std::string got = args_before(r, static_cast<int>(i), close_at);
      EXPECT_NE(got.find(c.early[i]), std::string::npos)
          << "call " << i << " had only " << got << " before its close";
      EXPECT_EQ(whole.tool_calls[i].arguments.compare(0, got.size(), got), 0) << got;
    }
  }
  return whole;
}

ParserOptions opts(ToolCallFormat f) {
  ParserOptions o;
  o.format.tools = f;
  o.format.reasoning = true;
  o.id_seed = 3;
  o.tools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"location": {"type": "string"},
      "days": {"type": "integer"}, "units": {"type": "string"}}}}},
      {"type": "function", "function": {"name": "write_file", "parameters": {"type": "object",
      "properties": {"path": {"type": "string"}, "text": {"type": "string"},
      "mode": {"type": "integer"}}}}}])");
  return o;
}

const std::string kLong =
    "Once upon a time, \"quoted\" and \\ backslashed, with tabs\tand\nnewlines, é ü 日本 🙂, "
    "the end.";

TEST(ParseStream, Hermes) {
  const ChatMsg m = check_case(
      {"hermes",
       ToolCallFormat::HERMES,
       "<think>Weather first.</think>\nChecking.\n<tool_call>\n{\"name\": \"get_weather\", "
       "\"arguments\": {\"location\": \"Oslo\", \"days\": 3, \"opts\": {\"a\": [1, 2.5e3, "
       "true, null, \"\\u00e9\\ud83d\\ude00\"]}}}\n</tool_call>\n<tool_call>\n{\"name\": "
       "\"write_file\", \"arguments\": {\"path\": \"a.txt\", \"text\": " +
           Json(kLong).dump() + "}}\n</tool_call>",
       {"get_weather", "write_file"},
       {R"({"location": "Oslo", "days": 3, "opts": {"a": [1, 2.5e3, true, null,
                  "\u00e9\ud83d\ude00"]}})",
        Json{{"path", "a.txt"}, {"text", kLong}}.dump()},
       {"</tool_call>", "</tool_call>"},
       {"\"location\":\"Oslo\",\"days\":3,\"opts\":{\"a\":[1,2.5e3",
        "\"text\":\"Once upon a time, \\\"quoted\\\""}},
      opts(ToolCallFormat::HERMES));
  // Compact; numbers and escapes as the model wrote them.
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(
      m.tool_calls[0].arguments,
      R"({"location":"Oslo","days":3,"opts":{"a":[1,2.5e3,true,null,"\u00e9\ud83d\ude00"]}})");
}

TEST(ParseStream, Llama3Json) {
  check_case({"llama3",
              ToolCallFormat::LLAMA3_JSON,
              "<|python_tag|>{\"type\": \"function\", \"name\": \"get_weather\", \"parameters\": "
              "{\"location\": \"Oslo\",\n \"days\": 3}}; {\"name\": \"write_file\", "
              "\"parameters\": {\"text\": " +
                  Json(kLong).dump() + ", \"mode\": 420}}",
              {"get_weather", "write_file"},
              {R"({"location": "Oslo", "days": 3})", Json{{"text", kLong}, {"mode", 420}}.dump()},
              {"}}", "}}"},
              {"{\"location\":\"Oslo\"", "{\"text\":\"Once upon a time"}},
             opts(ToolCallFormat::LLAMA3_JSON));
}

TEST(ParseStream, Qwen3CoderXml) {
  check_case({"qwen3-coder",
              ToolCallFormat::QWEN3_CODER,
              "<tool_call>\n<function=get_weather>\n<parameter=location>\nOslo\n</parameter>\n"
              "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n"
              "<function=write_file>\n<parameter=path>\na.txt\n</parameter>\n<parameter=text>\n" +
                  kLong +
                  "\n\n</parameter>\n<parameter=mode>\n420\n</parameter>\n</function>\n"
                  "</tool_call>",
              {"get_weather", "write_file"},
              {R"({"location": "Oslo", "days": 3})",
               Json{{"path", "a.txt"}, {"text", kLong + "\n"}, {"mode", 420}}.dump()},
              {"</function>", "</function>"},
              // A typed value goes out when it closes; a text one while it forms.
              {"{\"location\":\"Oslo\",\"days\":3",
               "{\"path\":\"a.txt\",\"text\":\"Once upon a time, \\\"quoted\\\""}},
             opts(ToolCallFormat::QWEN3_CODER));
}

TEST(ParseStream, Glm45Xml) {
  check_case({"glm45",
              ToolCallFormat::GLM45,
              "<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Oslo</arg_value>\n"
              "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>\n<tool_call>"
              "write_file\n<arg_key>text</arg_key>\n<arg_value>" +
                  kLong + "</arg_value>\n</tool_call>",
              {"get_weather", "write_file"},
              {R"({"location": "Oslo", "days": 3})", Json{{"text", kLong}}.dump()},
              {"</tool_call>", "</arg_value>\n</tool_call>"},
              {"{\"location\":\"Oslo\",\"days\":3", "{\"text\":\"Once upon a time"}},
             opts(ToolCallFormat::GLM45));
}

TEST(ParseStream, BeginDeltaCarriesIdAndName) {
  ChatParser p(opts(ToolCallFormat::HERMES));
  std::vector<ChatDelta> d;
  p.feed("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"loc", &d);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].kind, ChatDelta::Kind::TOOL_CALL_BEGIN);
  EXPECT_EQ(d[0].index, 0);
  EXPECT_EQ(d[0].name, "get_weather");
  EXPECT_EQ(d[0].id.substr(0, 5), "call_");
  EXPECT_EQ(d[1].kind, ChatDelta::Kind::TOOL_CALL_ARGS);
  EXPECT_EQ(d[1].text, "{");  // the key waits for its value
  d.clear();
  p.feed("ation\": \"Os", &d);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, "\"location\":\"Os");
  d.clear();
  p.feed("lo\", \"days\": 1", &d);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, "lo\"");  // the separator and the number wait for the number's end
  d.clear();
  p.feed("2}}\n</tool_call>", &d);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].text, ",\"days\":12}");
  p.finish(&d);
  EXPECT_EQ(p.message().tool_calls[0].arguments, R"({"location":"Oslo","days":12})");
}

TEST(ParseStream, BrokenArgumentsCloseAndKeepText) {
  // Invalid JSON after the call began: the arguments close where the text stops being JSON,
  // the rest of the call's text is content.
  const ChatMsg m = ptest::check_split_invariance(
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1, \"b\": oops}}</tool_call> after",
      opts(ToolCallFormat::HERMES));
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments, R"({"a":1})");
  EXPECT_EQ(m.content, ", \"b\": oops}}</tool_call> after");
  // The reply ends inside a string: it is closed.
  const ChatMsg e = ptest::check_split_invariance(
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [\"x\\ty", opts(ToolCallFormat::HERMES));
  ASSERT_EQ(e.tool_calls.size(), 1u);
  EXPECT_EQ(e.tool_calls[0].arguments, R"({"a":["x\ty"]})");
  // A missing outer brace still ends at </tool_call>.
  const ChatMsg b = ptest::check_split_invariance(
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}</tool_call>ok",
      opts(ToolCallFormat::HERMES));
  ASSERT_EQ(b.tool_calls.size(), 1u);
  EXPECT_EQ(b.content, "ok");
}

TEST(ParseStream, UnstreamableLayoutsParseWhole) {
  // Arguments before the name, arguments as a JSON string, an id: parsed once closed.
  const ChatMsg m = ptest::check_split_invariance(
      "<tool_call>{\"arguments\": {\"a\": 1}, \"name\": \"f\"}</tool_call><tool_call>{\"id\": "
      "\"x1\", \"name\": \"g\", \"arguments\": \"{\\\"b\\\": 2}\"}</tool_call>",
      opts(ToolCallFormat::HERMES));
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0].arguments, R"({"a":1})");
  EXPECT_EQ(m.tool_calls[1].id, "x1");
  EXPECT_EQ(m.tool_calls[1].arguments, R"({"b":2})");
}

}  // namespace
}  // namespace geist::chat
