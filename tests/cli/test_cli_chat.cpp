// geist template, geist chat and geist run --chat.
// Where the expected values come from:
// - renderings: the fixtures' Python Jinja2 renderings (templates/expected/), and Python Jinja2
//   itself (templates/render_reference.py) for Hugging Face's ChatML template, which geist
//   falls back to for template-less models;
// - template errors: the fixtures' .err files (the template's own raise_exception message);
// - chat resume: the uninterrupted chat in one process (a resumed chat must continue it
//   exactly: greedy, same session state).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/cli_util.h"
#include "support/fixtures.h"

namespace geist::test {
namespace {

using Json = nlohmann::ordered_json;

const char* kStories = "models/stories260K.gguf";             // <s> / </s>, no template
const char* kStoriesQwen = "models/stories-qwen35-f32.gguf";  // no template
const char* kNemo = "mistralai-Mistral-Nemo-Instruct-2407";   // default special tokens

// Hugging Face transformers' former default template (ChatML), as published there.
const char* kHfChatml =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' "
    "}}{% endif %}";

Json fixture_case(const std::string& name) {
  const Json cases = Json::parse(read_text_file(fixture_path("templates/cases.json")));
  for (const Json& c : cases["cases"]) {
    if (c["name"] == name) return c;
  }
  ADD_FAILURE() << "no case " << name;
  return Json::object();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

// The request file geist template reads: an OpenAI chat request body.
std::string request_of(const Json& c) {
  Json r = {{"model", "x"}, {"messages", c["messages"]}};
  if (c.contains("tools")) r["tools"] = c["tools"];
  if (c.contains("add_generation_prompt")) r["add_generation_prompt"] = c["add_generation_prompt"];
  if (c.contains("context")) r["chat_template_kwargs"] = c["context"];
  return r.dump();
}

TEST(CliTemplate, FixtureTemplateRendersAsJinja2) {
  GEIST_REQUIRE_FIXTURES();
  TempDir dir;
  for (const char* name : {"multi_turn", "system", "unicode", "no_generation_prompt"}) {
    SCOPED_TRACE(name);
    write_file(dir.file("req.json"), request_of(fixture_case(name)));
    const CliResult r =
        run_geist({"template", "-m", fixture_path(kStories), "--request", dir.file("req.json"),
                   "--chat-template", fixture_path(std::string("templates/") + kNemo + ".jinja"),
                   "--now", "2026-01-15T09:30:00"},
                  dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, read_text_file(fixture_path(std::string("templates/expected/") + kNemo + "/" +
                                                 name + ".txt")));
  }
}

TEST(CliTemplate, WorksOnVocabOnlyFiles) {
  GEIST_REQUIRE_FIXTURES();
  TempDir dir;
  // A vocab-only GGUF (no tensors) with Qwen3's template (which uses no bos / eos text).
  const std::string name = "Qwen-Qwen3-0.6B";
  write_file(dir.file("req.json"), request_of(fixture_case("tools")));
  const CliResult r = run_geist(
      {"template", "-m", fixture_path("tokenizer/ggml-vocab-qwen2.gguf"), "--request",
       dir.file("req.json"), "--chat-template", fixture_path("templates/" + name + ".jinja")},
      dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, read_text_file(fixture_path("templates/expected/" + name + "/tools.txt")));
}

TEST(CliTemplate, TemplateErrorExitsWithItsMessage) {
  GEIST_REQUIRE_FIXTURES();
  TempDir dir;
  write_file(dir.file("req.json"), request_of(fixture_case("bad_role_order")));
  const CliResult r =
      run_geist({"template", "-m", fixture_path(kStories), "--request", dir.file("req.json"),
                 "--chat-template", fixture_path(std::string("templates/") + kNemo + ".jinja")},
                dir.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(r.out.empty()) << r.out;
  std::string err = read_text_file(
      fixture_path(std::string("templates/expected/") + kNemo + "/bad_role_order.err"));
  const std::string prefix = "TemplateError: ";
  ASSERT_EQ(err.rfind(prefix, 0), 0u) << err;
  err = err.substr(prefix.size());
  while (!err.empty() && err.back() == '\n') err.pop_back();
  EXPECT_NE(r.err.find(err), std::string::npos) << r.err;
}

TEST(CliTemplate, TemplateLessModelGetsHuggingFaceChatml) {
  GEIST_REQUIRE_FIXTURES();
  TempDir dir;
  // The oracle: Python Jinja2 renders HF's ChatML template for the fixture case.
  std::filesystem::create_directories(dir.file("tpl"));
  write_file(dir.file("tpl/chatml.jinja"), kHfChatml);
  Json cases = Json::parse(read_text_file(fixture_path("templates/cases.json")));
  Json one = {{"special_tokens", cases["special_tokens"]},
              {"cases", Json::array({fixture_case("multi_turn")})}};
  write_file(dir.file("cases.json"), one.dump());
  const std::string cmd = "/usr/bin/python3 " + fixture_path("templates/render_reference.py") +
                          " " + dir.file("tpl") + " " + dir.file("out") + " " +
                          dir.file("cases.json") + " chatml >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "python3-jinja2 is needed (scripts/install_deps.sh)";
  const std::string expected = read_text_file(dir.file("out/expected/chatml/multi_turn.txt"));

  write_file(dir.file("req.json"), request_of(fixture_case("multi_turn")));
  const CliResult r = run_geist(
      {"template", "-m", fixture_path(kStories), "--request", dir.file("req.json")}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected);
  EXPECT_NE(r.err.find("no chat template"), std::string::npos) << r.err;
}

// The per-turn stats lines of geist chat: (prompt tokens, reused tokens), from
// "[prompt N tokens: R reused, ...". (No std::regex: GCC 12 warns inside it at -O1.)
std::vector<std::pair<int, int>> turn_stats(const std::string& err) {
  std::vector<std::pair<int, int>> out;
  const std::string head = "[prompt ";
  for (size_t at = err.find(head); at != std::string::npos; at = err.find(head, at + 1)) {
    int prompt = 0, reused = 0;
    if (std::sscanf(err.c_str() + at, "[prompt %d tokens: %d reused", &prompt, &reused) == 2) {
      out.emplace_back(prompt, reused);
    }
  }
  return out;
}

std::vector<std::string> chat_args(const std::string& model) {
  return {"chat", "-m", model, "--temp", "0", "-n", "12", "-t", "2", "--kv-mode", "f32"};
}

TEST(CliChat, TurnsReuseTheSession) {
  GEIST_REQUIRE_FIXTURES();
  TempDir dir;
  const CliResult r = run_geist_input(
      chat_args(fixture_path(kStoriesQwen)),
      "Once upon a time\nThe cat sat\nTell me more\nAnd then?\nThe end\n/exit\n", dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto stats = turn_stats(r.err);
  ASSERT_EQ(stats.size(), 5u) << r.err;
  EXPECT_EQ(stats[0].second, 0);
  for (size_t i = 1; i < stats.size(); ++i) {
    // Everything up to the previous reply is held already.
    EXPECT_GT(stats[i].second, stats[i - 1].first) << r.err;
    EXPECT_LT(stats[i].second, stats[i].first) << r.err;
  }
  std::printf("geist chat, 5 turns (prompt tokens / reused):");
  for (const auto& [p, u] : stats) std::printf(" %d/%d", p, u);
  std::printf("\n");
}

TEST(CliChat, SaveAndLoadContinueTheChat) {
  GEIST_REQUIRE_FIXTURES();
  TempDir dir;
  const std::string model = fixture_path(kStoriesQwen);
  const CliResult whole =
      run_geist_input(chat_args(model), "Once upon a time\nThe cat sat\n", dir.path());
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const CliResult first = run_geist_input(
      chat_args(model), "Once upon a time\n/save " + dir.file("c.chat") + "\n", dir.path());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  std::vector<std::string> args = chat_args(model);
  args.insert(args.end(), {"--load", dir.file("c.chat")});
  const CliResult resumed = run_geist_input(args, "The cat sat\n", dir.path());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  // The uninterrupted run's stdout is reply 1 then reply 2, one line each.
  EXPECT_EQ(first.out + resumed.out, whole.out);
  const auto stats = turn_stats(resumed.err);
  ASSERT_EQ(stats.size(), 1u) << resumed.err;
  EXPECT_GT(stats[0].second, 0) << "the resumed turn prefilled everything again";
  EXPECT_NE(resumed.err.find("loaded 2 messages"), std::string::npos) << resumed.err;

  // A damaged file is refused and the chat goes on.
  std::string bytes = read_text_file(dir.file("c.chat"));
  bytes.resize(bytes.size() / 2);
  write_file(dir.file("bad.chat"), bytes);
  const CliResult bad = run_geist_input(
      chat_args(model), "/load " + dir.file("bad.chat") + "\nOnce upon a time\n", dir.path());
  EXPECT_EQ(bad.exit_code, 0) << bad.err;
  EXPECT_NE(bad.err.find("cannot load"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.out, first.out);
}

TEST(CliRun, ChatFlagRendersOneUserMessage) {
  GEIST_REQUIRE_FIXTURES();
  TempDir dir;
  // The same prompt by hand: HF ChatML (the template-less fallback) for one user message.
  const std::string prompt =
      "<|im_start|>user\nOnce upon a time<|im_end|>\n<|im_start|>assistant\n";
  const CliResult chat = run_geist({"run", "-m", fixture_path(kStories), "--chat", "-p",
                                    "Once upon a time", "--temp", "0", "-n", "16", "--ids"},
                                   dir.path());
  const CliResult plain = run_geist(
      {"run", "-m", fixture_path(kStories), "-p", prompt, "--temp", "0", "-n", "16", "--ids"},
      dir.path());
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(chat.out, plain.out);
}

}  // namespace
}  // namespace geist::test
