// geist tokenize on llama.cpp's vocab-only GGUFs (fixtures/tokenizer/): no tensors, and
// architectures geist cannot run (bert, falcon, gpt2, mpt, starcoder2, qwen2). The ids come
// from llama.cpp's own test vectors (.inp/.out), tokenized without BOS and special parsing.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "cli/cli_util.h"
#include "support/fixtures.h"

namespace geist::test {
namespace {

// The inputs of an .inp file: each is followed by "\n__ggml_vocab_test__\n".
std::vector<std::string> split_inputs(const std::string& inp) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t next; (next = inp.find(sep, at)) != std::string::npos; at = next + sep.size()) {
    out.push_back(inp.substr(at, next - at));
  }
  return out;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) {
    out.push_back(text.substr(at, nl - at));
  }
  if (at < text.size()) out.push_back(text.substr(at));
  return out;
}

// Every 6th vector of `vocab_rel` (relative to the fixtures) through `geist tokenize -f`: a
// process per case costs a vocabulary load, and test_tokenizer runs every vector in process.
void check_cli_vectors(const std::string& vocab_rel) {
  constexpr size_t kStride = 6;
  const std::string gguf = fixture_path(vocab_rel);
  const std::vector<std::string> inputs = split_inputs(read_text_file(gguf + ".inp"));
  const std::vector<std::string> lines = split_lines(read_text_file(gguf + ".out"));
  ASSERT_FALSE(inputs.empty()) << vocab_rel;
  ASSERT_EQ(inputs.size(), lines.size()) << vocab_rel;
  TempDir dir;
  int passed = 0, tried = 0;
  for (size_t i = 0; i < inputs.size(); i += kStride, ++tried) {
    const std::string text_path = dir.file("case.txt");
    std::ofstream(text_path, std::ios::binary) << inputs[i];
    const CliResult r =
        run_geist({"tokenize", "-m", gguf, "-f", text_path, "--no-special"}, dir.path());
    ASSERT_EQ(r.exit_code, 0) << vocab_rel << " case " << i << ": " << r.err;
    const std::vector<int> got = parse_ids(r.out);
    const std::vector<int> want = parse_ids(lines[i]);
    EXPECT_EQ(got, want) << vocab_rel << " case " << i;
    passed += got == want ? 1 : 0;
  }
  EXPECT_EQ(passed, tried) << vocab_rel;
}

TEST(CliVocabOnly, LlamaSpm) {
  GEIST_REQUIRE_FIXTURES();
  check_cli_vectors("tokenizer/ggml-vocab-llama-spm.gguf");
}
TEST(CliVocabOnly, BertBge) {
  GEIST_REQUIRE_FIXTURES();
  check_cli_vectors("tokenizer/ggml-vocab-bert-bge.gguf");
}
TEST(CliVocabOnly, Falcon) {
  GEIST_REQUIRE_FIXTURES();
  check_cli_vectors("tokenizer/ggml-vocab-falcon.gguf");
}
TEST(CliVocabOnly, Gpt2) {
  GEIST_REQUIRE_FIXTURES();
  check_cli_vectors("tokenizer/ggml-vocab-gpt-2.gguf");
}
TEST(CliVocabOnly, Starcoder) {
  GEIST_REQUIRE_FIXTURES();
  check_cli_vectors("tokenizer/ggml-vocab-starcoder.gguf");
}
TEST(CliVocabOnly, Qwen2) {
  GEIST_REQUIRE_FIXTURES();
  check_cli_vectors("tokenizer/ggml-vocab-qwen2.gguf");
}
TEST(CliVocabOnly, Qwen35) {
  GEIST_REQUIRE_FIXTURES();
  check_cli_vectors("tokenizer/qwen35/ggml-vocab-qwen35.gguf");
}

// Verbs that run the weights still refuse an architecture geist cannot run, by name.
TEST(CliVocabOnly, RunStillNeedsASupportedArchitecture) {
  GEIST_REQUIRE_FIXTURES();
  TempDir dir;
  const CliResult r = run_geist(
      {"run", "-m", fixture_path("tokenizer/ggml-vocab-bert-bge.gguf"), "-p", "hi"}, dir.path());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("architecture 'bert'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace geist::test
