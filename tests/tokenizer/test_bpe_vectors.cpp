// Byte-level BPE against llama.cpp's tokenizer test vectors (ids produced by llama.cpp / Hugging
// Face tokenizers), and round trips through decode.
#include <gtest/gtest.h>

#include <random>

#include "support/fixtures.h"
#include "tokenizer/tokenizer_base.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vectors.h"

namespace geist {
namespace {

TEST(BpeVectors, Gpt2) {
  GEIST_REQUIRE_FIXTURES();
  test::check_vectors("gpt-2");
}
TEST(BpeVectors, Qwen2) {
  GEIST_REQUIRE_FIXTURES();
  test::check_vectors("qwen2");
}
TEST(BpeVectors, Mpt) {
  GEIST_REQUIRE_FIXTURES();
  test::check_vectors("mpt");
}
TEST(BpeVectors, Falcon) {
  GEIST_REQUIRE_FIXTURES();
  test::check_vectors("falcon");
}
TEST(BpeVectors, Starcoder) {
  GEIST_REQUIRE_FIXTURES();
  test::check_vectors("starcoder");
}
TEST(BpeVectors, DeepseekLlm) {
  GEIST_REQUIRE_FIXTURES();
  test::check_vectors("deepseek-llm");
}

// The deepseek-r1-qwen vectors come without their vocab, but that vocab is Qwen2's with the
// qwen2 pre-tokenizer (fixtures/README.md), so the qwen2 vocab must reproduce them.
TEST(BpeVectors, DeepseekR1QwenWithQwen2Vocab) {
  GEIST_REQUIRE_FIXTURES();
  const std::string base = "tokenizer/ggml-vocab-deepseek-r1-qwen.gguf";
  const auto inputs =
      test::parse_vocab_inputs(test::read_text_file(test::fixture_path(base + ".inp")));
  const auto expected =
      test::parse_vocab_outputs(test::read_text_file(test::fixture_path(base + ".out")));
  ASSERT_FALSE(inputs.empty());
  ASSERT_EQ(inputs.size(), expected.size());
  const auto tok = test::load_fixture_tokenizer("tokenizer/ggml-vocab-qwen2.gguf");
  ASSERT_NE(tok, nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<int32_t> got;
    ASSERT_TRUE(tok->encode(inputs[i], false, false, &got).is_ok());
    EXPECT_EQ(got, expected[i]) << "case " << i << " '" << test::escape_for_message(inputs[i])
                                << "'";
  }
}

// Texts that exercise every pre-tokenizer branch: scripts, emoji (multi-code-point ZWJ
// sequences), CJK, combining marks, all kinds of whitespace, digits, contractions, and bytes
// that are not UTF-8.
std::vector<std::string> round_trip_texts() {
  std::vector<std::string> t = {
      "",
      "Hello, world! I'm here; you're there. We'll see, they'd know.",
      "  leading and trailing spaces   ",
      "tabs\tand\nnewlines\r\n\r\n\n  mixed \t \n",
      "数字 12345 and 3.14159, 1,000,000",
      "中文测试：你好，世界！今天是2026年",
      "日本語のテキスト、カタカナ、ひらがな。",
      "한국어 텍스트입니다",
      "emoji: 😀🎉👍🏽 👨‍👩‍👧‍👦 🇩🇪",
      "combining: e\xCC\x81 a\xCC\x8A n\xCC\x83 \xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D",
      "Ελληνικά και Кириллица",
      "\xC2\xA0nbsp\xE3\x80\x80"
      "ideographic\xE2\x80\x83"
      "em space\xC2\x85"
      "nel",
      "code: for (int i = 0; i < n; ++i) { x[i] += y[i] * 2; }",
      "invalid: \xFF\xFE \xC0\x80 \xED\xA0\x80 \xE4\xB8 end\x80",
      std::string("nul\0byte", 8),
  };
  // Random bytes: mostly invalid UTF-8, with ASCII mixed in.
  std::mt19937 rng(1234);
  for (int n = 0; n < 20; ++n) {
    std::string s;
    const int len = static_cast<int>(rng() % 64);
    for (int i = 0; i < len; ++i) {
      s.push_back(static_cast<char>(rng() % 3 == 0 ? 'a' + rng() % 26 : rng() % 256));
    }
    t.push_back(s);
  }
  return t;
}

class BpeRoundTrip : public ::testing::TestWithParam<const char*> {};

// The byte stream the tokens stand for (token_to_piece concatenated) is the input, for every
// BPE vocab; decode equals it too where the vocab does not clean up spaces. A vocab trained on
// valid UTF-8 may lack the symbols of bytes that never occur there (0xC0, 0xC1, 0xF5..0xFF);
// such a byte cannot be represented and is dropped (llama.cpp turns it into U+FFFD before
// tokenizing), so the expected text is the input without the bytes whose symbol the vocab
// lacks.
TEST_P(BpeRoundTrip, PiecesReproduceInput) {
  GEIST_REQUIRE_FIXTURES();
  const auto tok =
      test::load_fixture_tokenizer(std::string("tokenizer/ggml-vocab-") + GetParam() + ".gguf");
  ASSERT_NE(tok, nullptr);
  const auto* base = dynamic_cast<const TokenizerBase*>(tok.get());
  ASSERT_NE(base, nullptr);
  // A byte is representable when its symbol is an ordinary token (a user-defined token with
  // that text decodes to the text, not to the byte).
  const Vocab& vocab = base->vocab();
  bool has_byte[256];
  for (int b = 0; b < 256; ++b) {
    const int32_t id = vocab.tokens.find(unicode::utf8_encode(unicode::byte_to_cpt(b)));
    has_byte[b] = id >= 0 && vocab.types[id] != TokenAttr::USER_DEFINED;
  }
  // Everything up to plane 3 must be representable: printable ASCII, tab, newline, the
  // continuation bytes and the leads 0xC2..0xF0 (falcon and starcoder lack some of the leads
  // 0xF1..0xF4 of planes 4..16, which hold only unassigned and private-use code points).
  for (int b = 0x00; b <= 0xF0; ++b) {
    if (b != 0xC0 && b != 0xC1 && (b >= 0x20 || b == '\n' || b == '\t')) {
      EXPECT_TRUE(has_byte[b]) << GetParam() << " lacks byte " << b;
    }
  }
  for (const std::string& text : round_trip_texts()) {
    std::string want;
    for (char c : text) {
      if (has_byte[static_cast<uint8_t>(c)]) want.push_back(c);
    }
    std::vector<int32_t> ids;
    ASSERT_TRUE(tok->encode(text, false, false, &ids).is_ok());
    std::string pieces, piece;
    for (int32_t id : ids) {
      ASSERT_TRUE(tok->token_to_piece(id, &piece).is_ok());
      pieces += piece;
    }
    EXPECT_EQ(pieces, want) << GetParam() << ": '" << test::escape_for_message(text) << "'";
    if (!base->vocab().clean_spaces) {
      std::string decoded;
      ASSERT_TRUE(tok->decode(ids.data(), ids.size(), &decoded).is_ok());
      EXPECT_EQ(decoded, want) << GetParam() << ": '" << test::escape_for_message(text) << "'";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllBpeVocabs, BpeRoundTrip,
                         ::testing::Values("gpt-2", "qwen2", "gpt-neox", "mpt", "falcon",
                                           "starcoder", "deepseek-llm"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) {
                             if (c == '-') c = '_';
                           }
                           return s;
                         });

}  // namespace
}  // namespace geist
