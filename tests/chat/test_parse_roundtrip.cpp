// Round trip against the template fixtures: the assistant turns that Python Jinja2 rendered
// (templates/expected/NAME/CASE.txt, from templates/cases.json) are cut out of the prompt and
// parsed with the format detected from the template's source; the calls (names, arguments as
// JSON values), the content and the reasoning must be what cases.json says.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "chat/chat_format.h"
#include "chat/chat_parse.h"
#include "parse_util.h"
#include "support/fixtures.h"

namespace geist::chat {
namespace {

struct Turns {
  std::string_view open, close;
};

// The assistant turns of a rendered prompt, in order; a turn without its end marker (the
// generation prompt) is not one.
std::vector<std::string> assistant_turns(const std::string& text) {
  const std::vector<Turns> layouts = {
      {"<|im_start|>assistant\n", "<|im_end|>"},
      {"<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"},
      {"<|start_of_role|>assistant<|end_of_role|>", "<|end_of_text|>"},  // Granite
      {"<assistant>\n", "\n</assistant>"},                               // Laguna
  };
  std::vector<std::string> turns;
  for (const Turns& t : layouts) {
    size_t pos = 0;
    while ((pos = text.find(t.open, pos)) != std::string::npos) {
      pos += t.open.size();
      const size_t end = text.find(t.close, pos);
      if (end == std::string::npos) break;
      turns.push_back(text.substr(pos, end - pos));
      pos = end;
    }
    if (!turns.empty()) break;
  }
  return turns;
}

ChatMsg expected_msg(const Json& message) {
  ChatMsg m;
  if (message.contains("content") && message["content"].is_string()) m.content = message["content"];
  if (message.contains("reasoning_content")) m.reasoning_content = message["reasoning_content"];
  auto tc = message.find("tool_calls");
  if (tc != message.end()) {
    for (const Json& call : *tc) {
      const Json& f = call["function"];
      const Json& args = f["arguments"];
      m.tool_calls.push_back(ToolCall{"", f["name"].get<std::string>(),
                                      args.is_string() ? args.get<std::string>() : args.dump()});
    }
  }
  return m;
}

class Roundtrip : public ::testing::TestWithParam<std::string> {};

TEST_P(Roundtrip, AssistantTurnsParseBack) {
  GEIST_REQUIRE_FIXTURES();
  const std::string name = GetParam();
  const std::string dir = geist::test::fixture_path("templates");
  const std::string source = geist::test::read_text_file(dir + "/" + name + ".jinja");
  const Json cases = Json::parse(geist::test::read_text_file(dir + "/cases.json"))["cases"];
  const ChatFormat format = detect_chat_format(source);
  ASSERT_NE(format.tools, ToolCallFormat::NONE) << name;
  int checked_calls = 0;
  for (const char* case_name : {"tool_call_roundtrip", "tool_call_string_arguments",
                                "reasoning_history", "multi_turn", "long_history"}) {
    const std::string path = dir + "/expected/" + name + "/" + case_name + ".txt";
    if (!std::filesystem::exists(path)) continue;  // the template raised on this case (.err)
    const Json* c = nullptr;
    for (const Json& x : cases) {
      if (x["name"] == case_name) c = &x;
    }
    ASSERT_NE(c, nullptr) << case_name;
    std::vector<ChatMsg> want;
    for (const Json& m : (*c)["messages"]) {
      if (m["role"] == "assistant") want.push_back(expected_msg(m));
    }
    const std::vector<std::string> turns = assistant_turns(geist::test::read_text_file(path));
    ASSERT_EQ(turns.size(), want.size()) << name << " " << case_name;
    ParserOptions opts;
    opts.format = format;
    opts.tools = c->value("tools", Json::array());
    opts.id_seed = 1;
    for (size_t i = 0; i < turns.size(); ++i) {
      // A turn that starts with "</think>" had its think block opened by the generation
      // prompt (Laguna): the model's own text starts in reasoning.
      opts.starts_in_reasoning = turns[i].rfind("</think>", 0) == 0;
      const ChatMsg got = ptest::check_split_invariance(turns[i], opts);
      // Most templates drop the reasoning of earlier turns; ids are not rendered.
      if (turns[i].find("<think>") == std::string::npos) want[i].reasoning_content.clear();
      EXPECT_TRUE(ptest::same_msg(got, want[i], /*compare_ids=*/false))
          << name << " " << case_name << " turn " << i << ": " << ptest::describe(got) << " want "
          << ptest::describe(want[i]) << "\n--- turn text:\n"
          << turns[i];
      checked_calls += static_cast<int>(want[i].tool_calls.size());
    }
  }
  EXPECT_GT(checked_calls, 0) << name << ": no rendered tool call was checked";
}

INSTANTIATE_TEST_SUITE_P(
    Templates, Roundtrip,
    ::testing::Values("Qwen3.5-4B", "Qwen3-Coder", "Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B",
                      "Qwen-QwQ-32B", "MiMo-VL", "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use",
                      "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
                      "meta-llama-Llama-3.1-8B-Instruct", "meta-llama-Llama-3.2-3B-Instruct",
                      "ibm-granite-granite-4.0", "poolside-Laguna-XS.2", "poolside-Laguna-XS-2.1"),
    [](const ::testing::TestParamInfo<std::string>& info) {
      std::string s = info.param;
      for (char& ch : s) {
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return s;
    });

// The detected formats of the fixture templates.
TEST(DetectFormatFixtures, KnownTemplates) {
  GEIST_REQUIRE_FIXTURES();
  const std::string dir = geist::test::fixture_path("templates");
  const auto detect = [&](const std::string& name) {
    return detect_chat_format(geist::test::read_text_file(dir + "/" + name + ".jinja"));
  };
  EXPECT_EQ(detect("Qwen3.5-4B").tools, ToolCallFormat::QWEN3_CODER);
  EXPECT_TRUE(detect("Qwen3.5-4B").reasoning);
  EXPECT_EQ(detect("Qwen3-Coder").tools, ToolCallFormat::QWEN3_CODER);
  EXPECT_FALSE(detect("Qwen3-Coder").reasoning);
  EXPECT_EQ(detect("Qwen-Qwen2.5-7B-Instruct").tools, ToolCallFormat::HERMES);
  EXPECT_EQ(detect("Qwen-Qwen3-0.6B").tools, ToolCallFormat::HERMES);
  EXPECT_TRUE(detect("Qwen-Qwen3-0.6B").reasoning);
  EXPECT_EQ(detect("NousResearch-Hermes-3-Llama-3.1-8B-tool_use").tools, ToolCallFormat::HERMES);
  EXPECT_EQ(detect("meta-llama-Llama-3.1-8B-Instruct").tools, ToolCallFormat::LLAMA3_JSON);
  EXPECT_EQ(detect("meta-llama-Llama-3.2-3B-Instruct").tools, ToolCallFormat::LLAMA3_JSON);
  EXPECT_EQ(detect("google-gemma-2-2b-it").tools, ToolCallFormat::NONE);
  EXPECT_EQ(detect("ibm-granite-granite-4.0").tools, ToolCallFormat::HERMES);
  EXPECT_EQ(detect("poolside-Laguna-XS.2").tools, ToolCallFormat::GLM45);
  // Syntaxes without a parser yet must not be taken for a parsed one.
  EXPECT_EQ(detect("ByteDance-Seed-OSS").tools, ToolCallFormat::NONE);
  EXPECT_EQ(detect("meetkai-functionary-medium-v3.1").tools, ToolCallFormat::NONE);
  EXPECT_FALSE(detect("google-gemma-2-2b-it").reasoning);
}

// Qwen3.5's thinking prompt leaves the block open; with thinking off it is closed.
TEST(DetectFormatFixtures, Qwen35GenerationPrompt) {
  GEIST_REQUIRE_FIXTURES();
  const std::string dir = geist::test::fixture_path("templates/expected/Qwen3.5-4B");
  EXPECT_TRUE(prompt_opens_reasoning(geist::test::read_text_file(dir + "/basic.txt")));
  EXPECT_FALSE(prompt_opens_reasoning(geist::test::read_text_file(dir + "/thinking_off.txt")));
}

}  // namespace
}  // namespace geist::chat
