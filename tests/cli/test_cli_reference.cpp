// The CLI verbs against llama.cpp's reference data for stories260K.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "cli/cli_util.h"
#include "support/fixtures.h"

namespace geist::test {
namespace {

const char* kModel = "models/stories260K.gguf";
const char* kPrompt1 = "reference/stories260K/prompt1.json";
const char* kRandom200 = "reference/stories260K/random200.json";
constexpr int kStoriesVocab = 512;  // stories260K's vocabulary

TEST(CliTokenize, Prompt1MatchesLlamaCpp) {
  GEIST_REQUIRE_FIXTURES();
  const std::string json = read_text_file(fixture_path(kPrompt1));
  const std::string prompt = json_string(json, "prompt");
  const std::vector<int> expected = json_int_array(json, "prompt_tokens");
  ASSERT_FALSE(expected.empty());
  TempDir dir;
  const CliResult r = run_geist({"tokenize", "-m", fixture_path(kModel), "-p", prompt}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(parse_ids(r.out), expected);
}

TEST(CliTokenize, FromFileAndWithoutSpecialTokens) {
  GEIST_REQUIRE_FIXTURES();
  const std::string json = read_text_file(fixture_path(kPrompt1));
  const std::string prompt = json_string(json, "prompt");
  const std::vector<int> expected = json_int_array(json, "prompt_tokens");
  ASSERT_GE(expected.size(), 2u);
  ASSERT_EQ(expected[0], 1) << "prompt1 starts with BOS (id 1)";
  TempDir dir;
  {
    std::ofstream f(dir.file("prompt.txt"), std::ios::binary);
    f << prompt;
  }
  CliResult r =
      run_geist({"tokenize", "-m", fixture_path(kModel), "-f", dir.file("prompt.txt")}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(parse_ids(r.out), expected);

  // Without special tokens: the same ids minus the BOS llama.cpp added.
  r = run_geist({"tokenize", "-m", fixture_path(kModel), "-p", prompt, "--no-special"}, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(parse_ids(r.out), std::vector<int>(expected.begin() + 1, expected.end()));
}

// llama.cpp (F32 KV cache) logits of 200 tokens; our f32 forward must match within 1e-3.
void check_random200_logits(const std::vector<std::string>& extra) {
  const std::string json = read_text_file(fixture_path(kRandom200));
  const std::vector<int> tokens = json_int_array(json, "prompt_tokens");
  ASSERT_EQ(tokens.size(), 200u);
  const std::vector<float> ref = read_f32_file(fixture_path("reference/stories260K/random200.f32"));
  ASSERT_EQ(ref.size(), 200u * kStoriesVocab);
  TempDir dir;
  std::vector<std::string> args = {"logits",
                                   "-m",
                                   fixture_path(kModel),
                                   "--tokens",
                                   join_ids(tokens, ','),
                                   "-o",
                                   dir.file("logits.f32"),
                                   "--kv-mode",
                                   "f32"};  // the reference's KV cache
  args.insert(args.end(), extra.begin(), extra.end());
  const CliResult r = run_geist(args, dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<float> got = read_f32_file(dir.file("logits.f32"));
  ASSERT_EQ(got.size(), ref.size());
  double max_diff = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(got[i] - ref[i])));
  }
  EXPECT_LT(max_diff, 1e-3);
}

TEST(CliLogits, Random200MatchesLlamaCpp) {
  GEIST_REQUIRE_FIXTURES();
  check_random200_logits({});
}

TEST(CliLogits, Random200InBatchesOf7MatchesLlamaCpp) {
  GEIST_REQUIRE_FIXTURES();
  check_random200_logits({"--batch", "7", "-t", "2"});
}

TEST(CliRun, GreedyIdsMatchLlamaCpp) {
  GEIST_REQUIRE_FIXTURES();
  const std::string json = read_text_file(fixture_path(kPrompt1));
  const std::vector<int> prompt = json_int_array(json, "prompt_tokens");
  const std::vector<int> greedy = json_int_array(json, "greedy_tokens");
  ASSERT_EQ(greedy.size(), 64u);
  TempDir dir;
  const CliResult r =
      run_geist({"run", "-m", fixture_path(kModel), "--tokens", join_ids(prompt, ','), "--temp",
                 "0", "-n", "64", "--ids", "--kv-mode", "f32"},
                dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(parse_ids(r.out), greedy);
  // Exactly one line of ids on stdout; the stats line goes to stderr.
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1);
  EXPECT_NE(r.err.find("prompt 32 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tok/s"), std::string::npos) << r.err;
}

TEST(CliRun, GreedyTextFromBos) {
  GEIST_REQUIRE_FIXTURES();
  TempDir dir;
  // An empty prompt is just BOS. fixtures/README.md: "Greedy from BOS writes 'Once upon a
  // time, there was a little girl named Lily...'".
  const CliResult r = run_geist(
      {"run", "-m", fixture_path(kModel), "-p", "", "--temp", "0", "-n", "16", "--kv-mode", "f32"},
      dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Once upon a time, there was a little girl named Lily"), std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("prompt 1 tokens"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace geist::test
