#include "tokenizer/vectors.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

#include "formats/gguf.h"
#include "support/fixtures.h"
#include "tokenizer/tokenizer_base.h"

namespace geist::test {

std::vector<std::string> parse_vocab_inputs(const std::string& inp) {
  static constexpr std::string_view kSep = "__ggml_vocab_test__";
  std::vector<std::string> inputs;
  std::string cur;
  bool have_line = false;  // cur holds at least one line of the current input
  size_t pos = 0;
  while (pos < inp.size()) {
    size_t eol = inp.find('\n', pos);
    if (eol == std::string::npos) eol = inp.size();
    const std::string_view line(inp.data() + pos, eol - pos);
    pos = eol + 1;
    if (line == kSep) {
      inputs.push_back(cur);
      cur.clear();
      have_line = false;
      continue;
    }
    if (have_line) cur.push_back('\n');
    cur.append(line);
    have_line = true;
  }
  return inputs;
}

std::vector<std::vector<int32_t>> parse_vocab_outputs(const std::string& out) {
  std::vector<std::vector<int32_t>> res;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream ids(line);
    std::vector<int32_t> v;
    int64_t id;
    while (ids >> id) v.push_back(static_cast<int32_t>(id));
    res.push_back(std::move(v));
  }
  return res;
}

std::unique_ptr<Tokenizer> load_fixture_tokenizer(const std::string& rel_path) {
  std::unique_ptr<GgufFile> file;
  const Status st = GgufFile::open(fixture_path(rel_path), &file);
  EXPECT_TRUE(st.is_ok()) << rel_path << ": " << st.message();
  if (!st) return nullptr;
  std::unique_ptr<Tokenizer> tok;
  const Status st2 = Tokenizer::load(*file, Logger{}, &tok);
  EXPECT_TRUE(st2.is_ok()) << rel_path << ": " << st2.message();
  if (!st2) return nullptr;
  return tok;
}

std::string escape_for_message(const std::string& s) {
  std::string r;
  for (unsigned char c : s) {
    if (c == '\n') {
      r += "\\n";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      r += buf;
    } else {
      r.push_back(static_cast<char>(c));
    }
  }
  return r;
}

namespace {

std::string ids_to_string(const std::vector<int32_t>& ids) {
  std::string r;
  for (int32_t id : ids) {
    r.push_back(' ');
    r.append(std::to_string(id));
  }
  return r;
}

bool is_lossless(const Tokenizer& tok) {
  const auto* base = dynamic_cast<const TokenizerBase*>(&tok);
  if (!base) return false;
  const Vocab& v = base->vocab();
  if (v.model == "llama") {
    // Every byte must have a token, or unknown characters are lost to <unk>.
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      if (v.tokens.find(name) < 0) return false;
    }
    return true;
  }
  return v.model == "gpt2" && !v.clean_spaces;
}

}  // namespace

void check_vectors(const std::string& vocab_name) {
  const std::string base = "tokenizer/ggml-vocab-" + vocab_name + ".gguf";
  const auto inputs = parse_vocab_inputs(read_text_file(fixture_path(base + ".inp")));
  const auto expected = parse_vocab_outputs(read_text_file(fixture_path(base + ".out")));
  ASSERT_FALSE(inputs.empty()) << base << ".inp has no cases";
  ASSERT_EQ(inputs.size(), expected.size()) << base << ": .inp and .out disagree on the count";
  const std::unique_ptr<Tokenizer> tok = load_fixture_tokenizer(base);
  ASSERT_NE(tok, nullptr);
  const bool lossless = is_lossless(*tok);

  int n_fail = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<int32_t> got;
    const Status st = tok->encode(inputs[i], /*add_special=*/false, /*parse_special=*/false, &got);
    if (!st) {
      ADD_FAILURE() << vocab_name << " case " << i << " '" << escape_for_message(inputs[i])
                    << "': encode failed: " << st.message();
      ++n_fail;
      continue;
    }
    if (got != expected[i]) {
      ADD_FAILURE() << vocab_name << " case " << i << " '" << escape_for_message(inputs[i])
                    << "'\n  expected:" << ids_to_string(expected[i])
                    << "\n  got:     " << ids_to_string(got);
      ++n_fail;
      continue;
    }
    if (lossless) {
      std::string text;
      const Status sd = tok->decode(got.data(), got.size(), &text);
      if (!sd || text != inputs[i]) {
        ADD_FAILURE() << vocab_name << " case " << i << ": decode(encode(x)) gave '"
                      << escape_for_message(text) << "' for '" << escape_for_message(inputs[i])
                      << "' " << sd.message();
        ++n_fail;
      }
    }
  }
  EXPECT_EQ(n_fail, 0) << vocab_name << ": " << n_fail << " of " << inputs.size()
                       << " cases failed";
}

}  // namespace geist::test
