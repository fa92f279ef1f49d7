// Usage errors and bad input: a non-zero exit code and a message naming the problem.
#include <gtest/gtest.h>

#include <cstdio>

#include "cli/cli_util.h"
#include "support/fixtures.h"

namespace geist::test {
namespace {

void expect_failure(const std::vector<std::string>& args, const std::string& needle) {
  TempDir dir;
  const CliResult r = run_geist(args, dir.path());
  std::string cmd = "geist";
  for (const std::string& a : args) cmd += " " + a;
  EXPECT_NE(r.exit_code, 0) << cmd;
  EXPECT_NE(r.exit_code, -1) << cmd << ": the process must exit, not crash";
  EXPECT_NE(r.err.find(needle), std::string::npos)
      << cmd << ": stderr should mention '" << needle << "', got: " << r.err;
}

TEST(CliErrors, UsageProblemsAreNamed) {
  expect_failure({}, "usage");
  expect_failure({"frobnicate"}, "unknown command 'frobnicate'");
  // The list of valid verbs names the newest ones too.
  expect_failure({"frobnicate"}, "bench-snapshot");
  expect_failure({"frobnicate"}, "quantize");
  expect_failure({"run", "-m", "x.gguf", "-p", "hi", "--bogus"}, "unknown option '--bogus'");
  expect_failure({"run", "-m", "x.gguf", "-p"}, "-p needs a value");
  expect_failure({"run", "-m", "x.gguf", "-p", "hi", "-n", "ten"}, "invalid value 'ten'");
  expect_failure({"run", "-m", "x.gguf", "-p", "hi", "--temp", "hot"}, "--temp");
  expect_failure({"run", "-p", "hi"}, "missing -m");
  expect_failure({"run", "-m", "x.gguf"}, "-p TEXT or --tokens IDS");
  expect_failure({"run", "-m", "x.gguf", "-p", "hi", "--tokens", "1,2"}, "exactly one");
  expect_failure({"run", "-m", "x.gguf", "--tokens", "1,x,3"}, "invalid token id 'x'");
  expect_failure({"logits", "-m", "x.gguf", "--tokens", "1,2"}, "missing -o");
  expect_failure({"logits", "-m", "x.gguf", "--tokens", "1", "-o", "o", "--batch", "0"}, "--batch");
  expect_failure({"run", "-m", "x.gguf", "-p", "hi", "--kv-mode", "q5"}, "unknown --kv-mode 'q5'");
  expect_failure({"logits", "-m", "x.gguf", "--tokens", "1", "-o", "o", "--kv-mode", "F16"},
                 "unknown --kv-mode 'F16'");
  expect_failure({"tokenize", "-p", "hi"}, "missing -m");
  expect_failure({"info"}, "missing -m");
  expect_failure({"info", "-m", "x.gguf", "stray"}, "unexpected argument 'stray'");
  expect_failure({"mkmodel", "--type", "f32", "-o", "x.gguf"}, "missing --preset");
  expect_failure({"mkmodel", "--preset", "huge", "--type", "f32", "-o", "x.gguf"},
                 "unknown preset 'huge'");
  expect_failure({"mkmodel", "--preset", "tiny-llama", "--type", "q3", "-o", "x.gguf"},
                 "unknown model type 'q3'");
  expect_failure({"mkmodel", "--preset", "tiny-llama", "--type", "f32", "-o", "x", "--seed", "-1"},
                 "invalid value '-1'");
}

TEST(CliErrors, UnreadableFilesAreNamed) {
  TempDir dir;
  const std::string missing = dir.file("no-such-model.gguf");
  expect_failure({"info", "-m", missing}, "no-such-model.gguf");
  expect_failure({"run", "-m", missing, "-p", "hi"}, "no-such-model.gguf");
  expect_failure({"tokenize", "-m", missing, "-f", dir.file("no-such-text.txt")},
                 "no-such-text.txt");
  // A file that is not a GGUF.
  const std::string junk = dir.file("junk.gguf");
  FILE* f = std::fopen(junk.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fputs("this is not a model", f);
  std::fclose(f);
  expect_failure({"info", "-m", junk}, "junk.gguf");
  // An output path in a directory that does not exist.
  expect_failure(
      {"mkmodel", "--preset", "tiny-llama", "--type", "f32", "-o", dir.file("no/such/dir/x.gguf")},
      "no/such/dir");
}

TEST(CliErrors, BadTokenIdsAreRefusedByTheModel) {
  GEIST_REQUIRE_FIXTURES();
  TempDir dir;
  // stories260K has 512 tokens.
  expect_failure(
      {"run", "-m", fixture_path("models/stories260K.gguf"), "--tokens", "1,99999", "-n", "2"},
      "prefill failed");
  expect_failure({"logits", "-m", fixture_path("models/stories260K.gguf"), "--tokens", "1,512",
                  "-o", dir.file("l.f32")},
                 "failed");
}

// Settings the C ABI refuses reach the user with the field named. (The thread cap is refused
// before any thread starts; 300 keeps the test harmless should that ever regress.)
TEST(CliErrors, OutOfRangeSettingsAreRefusedNamingTheField) {
  GEIST_REQUIRE_FIXTURES();
  const std::string m = fixture_path("models/stories260K.gguf");
  expect_failure({"run", "-m", m, "-p", "hi", "-n", "2", "--top-p", "7"}, "top_p 7");
  expect_failure({"run", "-m", m, "-p", "hi", "-n", "2", "--temp", "-1"}, "temperature -1");
  expect_failure({"run", "-m", m, "-p", "hi", "-n", "2", "--min-p", "2"}, "min_p 2");
  expect_failure({"run", "-m", m, "-p", "hi", "-n", "2", "-t", "300"}, "n_threads 300");
}

TEST(CliHelp, HelpGoesToStdoutWithExitZero) {
  TempDir dir;
  const CliResult top = run_geist({"--help"}, dir.path());
  EXPECT_EQ(top.exit_code, 0);
  CliResult r;
  for (const char* verb : {"run", "logits", "tokenize", "info", "mkmodel"}) {
    EXPECT_NE(top.out.find(verb), std::string::npos) << verb;
    r = run_geist({verb, "--help"}, dir.path());
    EXPECT_EQ(r.exit_code, 0) << verb;
    EXPECT_NE(r.out.find(std::string("usage: geist ") + verb), std::string::npos) << r.out;
  }
  r = run_geist({"run", "--help"}, dir.path());
  for (const char* opt : {"--tokens", "--temp", "--top-k", "--top-p", "--min-p", "--seed", "--ctx",
                          "--ids", "--repeat-penalty", "--presence-penalty"}) {
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt;
  }
}

}  // namespace
}  // namespace geist::test
