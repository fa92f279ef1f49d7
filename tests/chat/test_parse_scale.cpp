// Long replies fed a byte at a time: the parser must stay linear in the reply's length (a
// quadratic rescan of a 256 KiB call would take minutes here).
#include <gtest/gtest.h>

#include <chrono>

#include "chat/chat_parse.h"
#include "parse_util.h"

namespace geist::chat {
namespace {

ChatMsg feed_bytes(const std::string& text, const ParserOptions& opts) {
  ChatParser p(opts);
  std::vector<ChatDelta> deltas;
  for (char c : text) {
    p.feed(std::string_view(&c, 1), &deltas);
    deltas.clear();
  }
  p.finish(&deltas);
  return p.message();
}

TEST(ParseScale, LongRepliesByteByByte) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string big(256 * 1024, 'x');
  ParserOptions o;
  o.format = {ToolCallFormat::QWEN3_CODER, true};
  o.starts_in_reasoning = true;
  ChatMsg m = feed_bytes(big + "</think>" + big, o);
  EXPECT_EQ(m.reasoning_content.size(), big.size());
  EXPECT_EQ(m.content.size(), big.size());

  o.starts_in_reasoning = false;
  m = feed_bytes("<tool_call>\n<function=w>\n<parameter=text>\n" + big +
                     "\n</parameter>\n</function>\n</tool_call>",
                 o);
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(Json::parse(m.tool_calls[0].arguments)["text"].get<std::string>().size(), big.size());

  o.format = {ToolCallFormat::HERMES, false};
  m = feed_bytes(
      "<tool_call>{\"name\": \"w\", \"arguments\": {\"t\": \"" + big + "\"}}</tool_call>", o);
  ASSERT_EQ(m.tool_calls.size(), 1u);

  o.format = {ToolCallFormat::LLAMA3_JSON, false};
  m = feed_bytes("{\"name\": \"w\", \"parameters\": {\"t\": \"" + big + "\"}}", o);
  ASSERT_EQ(m.tool_calls.size(), 1u);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 20.0) << "parsing ~1.3 MB byte by byte took " << s << " s";
}

}  // namespace
}  // namespace geist::chat
