// WordPiece ("bert") tokenizer: llama.cpp's bert-bge vectors and the BERT conventions.
#include <gtest/gtest.h>

#include <algorithm>

#include "support/fixtures.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_base.h"
#include "tokenizer/vectors.h"

namespace geist {
namespace {

TEST(Wpm, BertBgeVectors) {
  GEIST_REQUIRE_FIXTURES();
  test::check_vectors("bert-bge");
}

TEST(Wpm, SpecialTokensAndDecode) {
  GEIST_REQUIRE_FIXTURES();
  auto tok = test::load_fixture_tokenizer("tokenizer/ggml-vocab-bert-bge.gguf");
  ASSERT_NE(tok, nullptr);
  const Vocab& v = dynamic_cast<const TokenizerBase&>(*tok).vocab();
  ASSERT_EQ(v.tokens[101], "[CLS]");
  ASSERT_EQ(v.tokens[102], "[SEP]");
  ASSERT_EQ(v.tokens[100], "[UNK]");

  std::vector<int32_t> plain, with;
  ASSERT_TRUE(tok->encode("Hello, World!", false, false, &plain).is_ok());
  ASSERT_TRUE(tok->encode("Hello, World!", true, false, &with).is_ok());
  // BERT frames the text as [CLS] ... [SEP].
  std::vector<int32_t> framed = plain;
  framed.insert(framed.begin(), 101);
  framed.push_back(102);
  EXPECT_EQ(with, framed);

  // Word pieces join, word starts get a space, punctuation loses the space before it
  // (clean-up of tokenization spaces) and [CLS]/[SEP] print nothing; the case is gone.
  std::string text;
  ASSERT_TRUE(tok->decode(with.data(), with.size(), &text).is_ok());
  EXPECT_EQ(text, "hello, world!");

  // "[SEP]" in the text is the SEP token only when special tokens are parsed.
  std::vector<int32_t> ids;
  ASSERT_TRUE(tok->encode("a [SEP] b", false, true, &ids).is_ok());
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 102), 1);
  ASSERT_TRUE(tok->encode("a [SEP] b", false, false, &ids).is_ok());
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 102), 0);
}

}  // namespace
}  // namespace geist
