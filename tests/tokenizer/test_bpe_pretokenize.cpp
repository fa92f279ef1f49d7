// Pre-tokenizer splits of hand-written inputs; each expected split is worked out from the
// regexes (quoted in src/tokenizer/pretokenize.h/.cpp) by leftmost-first matching.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/pretokenize.h"

namespace geist {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(PreTokenizer t, std::string_view text) {
  Pieces out;
  for (std::string_view p : pre_tokenize(t, text)) out.emplace_back(p);
  return out;
}

TEST(PreTokenize, Gpt2) {
  const auto T = PreTokenizer::GPT2;
  EXPECT_EQ(split(T, "Hello world"), (Pieces{"Hello", " world"}));
  // Contractions are case-sensitive; a run of 2 spaces before a word leaves one for " fine";
  // punctuation runs; a final lone newline is \s+.
  EXPECT_EQ(split(T, "I'm  fine!!\n"), (Pieces{"I", "'m", " ", " fine", "!!", "\n"}));
  EXPECT_EQ(split(T, "I'M"), (Pieces{"I", "'", "M"}));
  EXPECT_EQ(split(T, "abc123 456"), (Pieces{"abc", "123", " 456"}));
  EXPECT_EQ(split(T, "x  "), (Pieces{"x", "  "}));                // \s+(?!\S) takes all at the end
  EXPECT_EQ(split(T, "\t\tword"), (Pieces{"\t", "\t", "word"}));  // only ' ' joins a word
  EXPECT_EQ(split(T, ""), (Pieces{}));
}

TEST(PreTokenize, Llama3AndQwen2Digits) {
  EXPECT_EQ(split(PreTokenizer::LLAMA3, "12345"), (Pieces{"123", "45"}));
  EXPECT_EQ(split(PreTokenizer::QWEN2, "12345"), (Pieces{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(split(PreTokenizer::LLAMA3, "I'M"), (Pieces{"I", "'M"}));  // (?i:...) contractions
}

TEST(PreTokenize, Llama3Whitespace) {
  const auto T = PreTokenizer::LLAMA3;
  // \s*[\r\n]+ ends at the last newline of the run; the rest splits as \s+(?!\S) + " world".
  EXPECT_EQ(split(T, "Hello\n\n  world"), (Pieces{"Hello", "\n\n", " ", " world"}));
  // [^\r\n\p{L}\p{N}]?\p{L}+ takes any one non-letter prefix, a tab or punctuation too.
  EXPECT_EQ(split(T, "\tword;hello"), (Pieces{"\tword", ";hello"}));
  // With a space before the punctuation, the prefix is the space and the letters must follow
  // at once; otherwise " ?[^\s\p{L}\p{N}]+" takes " .".
  EXPECT_EQ(split(T, "a .hello"), (Pieces{"a", " .", "hello"}));
  // ...but not two: " ?[^\s\p{L}\p{N}]+[\r\n]*" takes the run and its newlines.
  EXPECT_EQ(split(T, "..hello;\n\nx"), (Pieces{"..", "hello", ";\n\n", "x"}));
}

TEST(PreTokenize, Qwen35KeepsCombiningMarksInWords) {
  // "e" + U+0301 COMBINING ACUTE ACCENT (Mn).
  const std::string s = "e\xCC\x81t\xC3\xA9";
  EXPECT_EQ(split(PreTokenizer::QWEN35, s), (Pieces{s}));
  EXPECT_EQ(split(PreTokenizer::QWEN2, s), (Pieces{"e", "\xCC\x81t\xC3\xA9"}));
  EXPECT_EQ(split(PreTokenizer::QWEN35, "a1b"), (Pieces{"a", "1", "b"}));
}

TEST(PreTokenize, DefaultPasses) {
  // [\p{P}$+<=>^~|]+ isolates "+" and "=", then [0-9]{3} cuts "3000".
  EXPECT_EQ(split(PreTokenizer::DEFAULT, "a+b=3000"), (Pieces{"a", "+", "b", "=", "300", "0"}));
}

TEST(PreTokenize, FalconIsolatesBacktick) {
  EXPECT_EQ(split(PreTokenizer::FALCON, " `x"), (Pieces{" ", "`", "x"}));
  EXPECT_EQ(split(PreTokenizer::DEFAULT, " `x"), (Pieces{" `", "x"}));
}

TEST(PreTokenize, StarcoderSingleDigits) {
  EXPECT_EQ(split(PreTokenizer::STARCODER, "ab12 cd"), (Pieces{"ab", "1", "2", " cd"}));
}

TEST(PreTokenize, DeepseekLlm) {
  const auto T = PreTokenizer::DEEPSEEK_LLM;
  // [\r\n] | \s?[cased letters]+ | ... | [CJK]+: " 世界" is no letter match, then CJK splits it.
  EXPECT_EQ(split(T, "Hello \xE4\xB8\x96\xE7\x95\x8C\n"),
            (Pieces{"Hello", " ", "\xE4\xB8\x96\xE7\x95\x8C", "\n"}));
  EXPECT_EQ(split(T, "a, b"), (Pieces{"a", ",", " b"}));
  EXPECT_EQ(split(T, "ab  "), (Pieces{"ab", "  "}));
  EXPECT_EQ(split(T, "x 42"), (Pieces{"x", " ", "42"}));
}

TEST(PreTokenize, DeepseekCoder) {
  EXPECT_EQ(split(PreTokenizer::DEEPSEEK_CODER, "x = 10;"), (Pieces{"x", " = ", "1", "0", ";"}));
}

TEST(PreTokenize, Poro) {
  EXPECT_EQ(split(PreTokenizer::PORO, "Hi, there."), (Pieces{"Hi", ",", " there", "."}));
}

TEST(PreTokenize, InvalidUtf8StaysAsItsBytes) {
  // The bad byte classifies like U+FFFD (a symbol) and is its own piece, unchanged.
  EXPECT_EQ(split(PreTokenizer::GPT2,
                  "a\xFF"
                  "b"),
            (Pieces{"a", "\xFF", "b"}));
}

TEST(PreTokenize, NamesMapAsLlamaCpp) {
  EXPECT_EQ(pre_tokenizer_from_name("").type, PreTokenizer::DEFAULT);
  EXPECT_TRUE(pre_tokenizer_from_name("").known);
  EXPECT_EQ(pre_tokenizer_from_name("gpt-2").type, PreTokenizer::GPT2);
  EXPECT_EQ(pre_tokenizer_from_name("mpt").type, PreTokenizer::GPT2);
  EXPECT_EQ(pre_tokenizer_from_name("qwen2").type, PreTokenizer::QWEN2);
  EXPECT_EQ(pre_tokenizer_from_name("qwen35").type, PreTokenizer::QWEN35);
  EXPECT_EQ(pre_tokenizer_from_name("refact").type, PreTokenizer::STARCODER);
  const PreTokenizerInfo l3 = pre_tokenizer_from_name("llama-bpe");
  EXPECT_EQ(l3.type, PreTokenizer::LLAMA3);
  EXPECT_TRUE(l3.ignore_merges);
  const PreTokenizerInfo unk = pre_tokenizer_from_name("made-up");
  EXPECT_FALSE(unk.known);
  EXPECT_EQ(unk.type, PreTokenizer::DEFAULT);
}

// Every pre-tokenizer partitions its input: the pieces are non-empty and concatenate back to
// the exact bytes, whatever the bytes are.
TEST(PreTokenize, PiecesCoverArbitraryBytes) {
  std::mt19937 rng(7);
  const std::string alphabet[] = {"a",
                                  "Z",
                                  "1",
                                  " ",
                                  "  ",
                                  "\n",
                                  "\r\n",
                                  "\t",
                                  "'s",
                                  "'LL",
                                  ".",
                                  "$",
                                  "`",
                                  "\xE4\xB8\xAD",
                                  "\xCC\x81",
                                  "\xF0\x9F\x98\x80",
                                  "\xE3\x80\x80",
                                  "\xC2\xA0",
                                  "\xFF",
                                  "\xE4\xB8",
                                  "\x80"};
  for (int n = 0; n < 300; ++n) {
    std::string s;
    const int len = static_cast<int>(rng() % 40);
    for (int i = 0; i < len; ++i) s += alphabet[rng() % std::size(alphabet)];
    for (int t = 0; t <= static_cast<int>(PreTokenizer::VIKING); ++t) {
      std::string joined;
      for (std::string_view p : pre_tokenize(static_cast<PreTokenizer>(t), s)) {
        EXPECT_FALSE(p.empty());
        joined += p;
      }
      ASSERT_EQ(joined, s) << "type " << t;
    }
  }
}

}  // namespace
}  // namespace geist
