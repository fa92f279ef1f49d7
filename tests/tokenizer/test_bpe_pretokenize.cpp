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

// Tekken and GPT-4o: the splits Python's `regex` module (2026.5.9) makes with llama.cpp's
// regexes for them (src/llama-vocab.cpp, LLAMA_VOCAB_PRE_TYPE_TEKKEN / _GPT4O; the pieces
// between matches included), on texts where that adaptation and tokenizer.json's regex agree.
struct SplitCase {
  std::string text;
  Pieces pieces;
};

const SplitCase kTekkenCases[] = {
    {"Hello World", {"Hello", " World"}},
    {"HelloWorld", {"Hello", "World"}},
    {"HTTPServer", {"HTTPServer"}},
    {"ABC def", {"ABC", " def"}},
    {"iPhone XR", {"i", "Phone", " XR"}},
    {"McDonald's", {"Mc", "Donald", "'s"}},
    {"I'M HERE'S we'll", {"I", "'M", " HERE", "'S", " we", "'ll"}},
    {"path/to/file.txt", {"path", "/to", "/file", ".txt"}},
    {"a.b/c//\x0A\x0Ax", {"a", ".b", "/c", "//\x0A\x0A", "x"}},
    {"12345 and 3.14", {"1", "2", "3", "4", "5", " and", " ", "3", ".", "1", "4"}},
    {"  leading  spaces  ", {" ", " leading", " ", " spaces", "  "}},
    {"tab\x09here\x0D\x0Anew\x0A\x0A  line",
     {"tab", "\x09here", "\x0D\x0A", "new", "\x0A\x0A", " ", " line"}},
    {"\xC3\x89"
     "cole \xC3\xA9t\xC3\xA9 \xC3\x9C"
     "BER",
     {"\xC3\x89"
      "cole",
      " \xC3\xA9t\xC3\xA9", " \xC3\x9C", "BER"}},
    {"\xE4\xB8\xAD\xE6\x96\x87"
     "ABC",
     {"\xE4\xB8\xAD\xE6\x96\x87", "ABC"}},
    {"CamelCaseWORDSHere", {"Camel", "Case", "WORDSHere"}},
    {"x--/y", {"x", "--/", "y"}},
    {" ?!/ ok", {" ?!/", " ok"}},
    {"don't DON'T", {"don", "'t", " DON", "'T"}},
    {"'s 'S", {"'s", " '", "S"}},
};

const SplitCase kGpt4oCases[] = {
    {"Hello World", {"Hello", " World"}},
    {"HelloWorld", {"Hello", "World"}},
    {"HTTPServer", {"HTTPServer"}},
    {"ABC def", {"ABC", " def"}},
    {"iPhone XR", {"i", "Phone", " XR"}},
    {"McDonald's", {"Mc", "Donald's"}},
    {"I'M HERE'S we'll", {"I'M", " HERE'S", " we'll"}},
    {"path/to/file.txt", {"path", "/to", "/file", ".txt"}},
    {"a.b/c//\x0A\x0Ax", {"a", ".b", "/c", "//\x0A\x0A", "x"}},
    {"12345 and 3.14", {"123", "45", " and", " ", "3", ".", "14"}},
    {"  leading  spaces  ", {" ", " leading", " ", " spaces", "  "}},
    {"tab\x09here\x0D\x0Anew\x0A\x0A  line",
     {"tab", "\x09here", "\x0D\x0A", "new", "\x0A\x0A", " ", " line"}},
    {"\xC3\x89"
     "cole \xC3\xA9t\xC3\xA9 \xC3\x9C"
     "BER",
     {"\xC3\x89"
      "cole",
      " \xC3\xA9t\xC3\xA9", " \xC3\x9C", "BER"}},
    {"\xE4\xB8\xAD\xE6\x96\x87"
     "ABC",
     {"\xE4\xB8\xAD\xE6\x96\x87", "ABC"}},
    {"CamelCaseWORDSHere", {"Camel", "Case", "WORDSHere"}},
    {"x--/y", {"x", "--/", "y"}},
    {" ?!/ ok", {" ?!/", " ok"}},
    {"don't DON'T", {"don't", " DON'T"}},
    {"'s 'S", {"'s", " '", "S"}},
};

TEST(PreTokenize, TekkenAsPythonRegex) {
  for (const SplitCase& c : kTekkenCases) {
    EXPECT_EQ(split(PreTokenizer::TEKKEN, c.text), c.pieces) << c.text;
  }
}

TEST(PreTokenize, Gpt4oAsPythonRegex) {
  for (const SplitCase& c : kGpt4oCases) {
    EXPECT_EQ(split(PreTokenizer::GPT4O, c.text), c.pieces) << c.text;
  }
}

PreTokenizerInfo info_of(std::string_view name) {
  PreTokenizerInfo info;
  EXPECT_TRUE(pre_tokenizer_from_name(name, &info).is_ok()) << name;
  return info;
}

TEST(PreTokenize, NamesMapAsLlamaCpp) {
  EXPECT_EQ(info_of("").type, PreTokenizer::DEFAULT);
  EXPECT_EQ(info_of("default").type, PreTokenizer::DEFAULT);
  EXPECT_EQ(info_of("gpt-2").type, PreTokenizer::GPT2);
  EXPECT_EQ(info_of("mpt").type, PreTokenizer::GPT2);
  EXPECT_EQ(info_of("qwen2").type, PreTokenizer::QWEN2);
  EXPECT_EQ(info_of("qwen35").type, PreTokenizer::QWEN35);
  EXPECT_EQ(info_of("refact").type, PreTokenizer::STARCODER);
  EXPECT_EQ(info_of("smollm").type, PreTokenizer::STARCODER);
  EXPECT_EQ(info_of("llama4").type, PreTokenizer::GPT4O);
  const PreTokenizerInfo l3 = info_of("llama-bpe");
  EXPECT_EQ(l3.type, PreTokenizer::LLAMA3);
  EXPECT_TRUE(l3.ignore_merges);
  const PreTokenizerInfo tekken = info_of("tekken");
  EXPECT_EQ(tekken.type, PreTokenizer::TEKKEN);
  EXPECT_TRUE(tekken.ignore_merges);
}

// Names llama.cpp refuses, and names it knows that geist cannot split, are errors that name
// the value; never a silent fallback to the default splits.
TEST(PreTokenize, UnknownAndUnsupportedNamesAreRefused) {
  PreTokenizerInfo info;
  Status st = pre_tokenizer_from_name("made-up", &info);
  EXPECT_EQ(st.code(), GEIST_E_UNSUPPORTED);
  EXPECT_NE(st.message().find("'made-up' is an unknown pre-tokenizer"), std::string::npos)
      << st.message();
  st = pre_tokenizer_from_name("kimi-k2", &info);
  EXPECT_EQ(st.code(), GEIST_E_UNSUPPORTED);
  EXPECT_NE(st.message().find("'kimi-k2'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("not supported"), std::string::npos) << st.message();
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
    for (int t = 0; t <= static_cast<int>(PreTokenizer::GPT4O); ++t) {
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
