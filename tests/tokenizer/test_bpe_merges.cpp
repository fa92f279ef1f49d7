// BPE merging on hand-made vocabularies, where the expected tokens follow from the merge
// ranks by hand.
#include <gtest/gtest.h>

#include "tokenizer/bpe.h"
#include "tokenizer/unicode.h"

namespace geist {
namespace {

// A byte-level vocab: the 256 byte symbols, then `extra` tokens; `merges` in rank order.
std::unique_ptr<Tokenizer> make(const std::vector<std::string>& extra,
                                const std::vector<std::string>& merges, const std::string& pre) {
  Vocab v;
  v.model = "gpt2";
  v.pre = pre;
  for (int b = 0; b < 256; ++b) {
    EXPECT_TRUE(v.tokens.push_back(unicode::utf8_encode(unicode::byte_to_cpt(b))));
  }
  for (const auto& t : extra) EXPECT_TRUE(v.tokens.push_back(t));
  v.types.assign(static_cast<size_t>(v.n_vocab()), TokenAttr::NORMAL);
  v.scores.assign(static_cast<size_t>(v.n_vocab()), 0.0f);
  for (const auto& m : merges) v.merges.push_back(m);
  std::unique_ptr<Tokenizer> tok;
  EXPECT_TRUE(make_bpe_tokenizer(std::move(v), Logger{}, &tok).is_ok());
  return tok;
}

std::vector<int32_t> bpe_encode(const Tokenizer& t, const std::string& s) {
  std::vector<int32_t> ids;
  EXPECT_TRUE(t.encode(s, false, false, &ids).is_ok());
  return ids;
}

TEST(BpeMerges, LowerRankMergesFirst) {
  // "abc": with "a b" ranked first the pair (a,b) merges, leaving c; with "b c" first, (b,c).
  const auto t1 = make({"ab", "bc"}, {"a b", "b c"}, "gpt-2");
  EXPECT_EQ(bpe_encode(*t1, "abc"), (std::vector<int32_t>{256, 'c'}));
  const auto t2 = make({"ab", "bc"}, {"b c", "a b"}, "gpt-2");
  EXPECT_EQ(bpe_encode(*t2, "abc"), (std::vector<int32_t>{'a', 257}));
}

TEST(BpeMerges, TiesGoLeftmostAndMergesChain) {
  // "aaa" with only "a a": the leftmost pair merges first -> "aa" + "a".
  const auto t = make({"aa", "aaaa"}, {"a a", "aa aa"}, "gpt-2");
  EXPECT_EQ(bpe_encode(*t, "aaa"), (std::vector<int32_t>{256, 'a'}));
  // "aaaa": a a -> (aa)(a)(a) -> (aa)(aa) -> aaaa.
  EXPECT_EQ(bpe_encode(*t, "aaaa"), (std::vector<int32_t>{257}));
}

TEST(BpeMerges, SpaceIsByteEncodedAndPiecesDoNotMergeAcrossWords) {
  // GPT-2 maps the space byte to U+0120 'Ġ'. "a a" pre-tokenizes to "a" and " a"; "Ġ a" merges
  // the second, and nothing merges across the split.
  const std::string g = unicode::utf8_encode(0x120);
  const auto t = make({g + "a", "aa"}, {g + " a", "a a"}, "gpt-2");
  EXPECT_EQ(bpe_encode(*t, "a a"), (std::vector<int32_t>{'a', 256}));
  EXPECT_EQ(bpe_encode(*t, "aa"), (std::vector<int32_t>{257}));
}

TEST(BpeMerges, IgnoreMergesTakesWholeWordTokens) {
  // "abc" is a token but no merge path leads to it: Llama 3 style (llama-bpe) takes it whole,
  // plain GPT-2 style falls back to the bytes.
  const auto llama3 = make({"abc"}, {}, "llama-bpe");
  EXPECT_EQ(bpe_encode(*llama3, "abc"), (std::vector<int32_t>{256}));
  const auto gpt2 = make({"abc"}, {}, "gpt-2");
  EXPECT_EQ(bpe_encode(*gpt2, "abc"), (std::vector<int32_t>{'a', 'b', 'c'}));
}

TEST(BpeMerges, FirstOfRepeatedRulesKeepsItsRank) {
  // "a b" is listed at ranks 0 and 2; rank 0 must stay, so (a,b) beats "b c" (rank 1).
  const auto t = make({"ab", "bc"}, {"a b", "b c", "a b"}, "gpt-2");
  EXPECT_EQ(bpe_encode(*t, "abc"), (std::vector<int32_t>{256, 'c'}));
}

TEST(BpeMerges, RulesThroughTextsThatAreNotTokens) {
  // Inconsistent files: "bc" is no token, yet "b c" makes it and "a bc" joins it to "abc",
  // which is, exactly as the rules' texts say.
  const auto t = make({"abc"}, {"b c", "a bc"}, "gpt-2");
  EXPECT_EQ(bpe_encode(*t, "abc"), (std::vector<int32_t>{256}));
  // A merge result that is no token and merges no further falls back to its characters.
  const auto u = make({}, {"b c"}, "gpt-2");
  EXPECT_EQ(bpe_encode(*u, "abc"), (std::vector<int32_t>{'a', 'b', 'c'}));
  // A rule naming texts no word contains changes nothing and is no error.
  const auto v = make({"ab"}, {"zz q", "a b"}, "gpt-2");
  EXPECT_EQ(bpe_encode(*v, "abc"), (std::vector<int32_t>{256, 'c'}));
}

TEST(BpeMerges, RuleWithTwoSpacesNeverApplies) {
  // A rule is "left right" split at its first space; a right half with a space can never be
  // a symbol of a byte-encoded word, whose spaces are U+0120.
  const auto t = make({"ab", "abc"}, {"a b c", "ab c"}, "gpt-2");
  EXPECT_EQ(bpe_encode(*t, "abc"), (std::vector<int32_t>{'a', 'b', 'c'}));
}

TEST(BpeMerges, MalformedMergesAreFormatErrors) {
  for (const char* bad : {"nospace", " a", "a ", " "}) {
    Vocab v;
    v.model = "gpt2";
    ASSERT_TRUE(v.tokens.push_back("a"));
    v.types = {TokenAttr::NORMAL};
    v.scores = {0.0f};
    v.merges.push_back("a a");
    v.merges.push_back(bad);
    std::unique_ptr<Tokenizer> tok;
    const Status st = make_bpe_tokenizer(std::move(v), Logger{}, &tok);
    EXPECT_EQ(st.code(), GEIST_E_FORMAT) << bad;
    EXPECT_NE(st.message().find("tokenizer.ggml.merges[1]"), std::string::npos) << st.message();
  }
}

TEST(BpeMerges, PiecesDecodeBytes) {
  const auto t = make({}, {}, "gpt-2");
  std::string s;
  for (int b = 0; b < 256; ++b) {
    ASSERT_TRUE(t->token_to_piece(b, &s).is_ok());
    EXPECT_EQ(s, std::string(1, static_cast<char>(b))) << b;
  }
}

TEST(BpeMerges, MalformedMergeIsAFormatError) {
  Vocab v;
  v.model = "gpt2";
  ASSERT_TRUE(v.tokens.push_back("a"));
  v.types = {TokenAttr::NORMAL};
  v.scores = {0.0f};
  v.merges.push_back("nospace");
  std::unique_ptr<Tokenizer> tok;
  EXPECT_EQ(make_bpe_tokenizer(std::move(v), Logger{}, &tok).code(), GEIST_E_FORMAT);
}

// As llama.cpp: a missing tokenizer.ggml.pre is the default splits with a warning; a name it
// does not know is refused, naming it (never a silent fallback that tokenizes differently).
TEST(BpeMerges, MissingPreWarnsUnknownPreIsRefused) {
  int warnings = 0;
  Logger log;
  log.user = &warnings;
  log.fn = [](void* user, geist_log_level level, const char*) {
    if (level == GEIST_LOG_WARN) ++*static_cast<int*>(user);
  };
  auto byte_vocab = [](const char* pre) {
    Vocab v;
    v.model = "gpt2";
    v.pre = pre;
    for (int b = 0; b < 256; ++b) {
      EXPECT_TRUE(v.tokens.push_back(unicode::utf8_encode(unicode::byte_to_cpt(b))));
    }
    v.types.assign(256, TokenAttr::NORMAL);
    v.scores.assign(256, 0.0f);
    return v;
  };
  std::unique_ptr<Tokenizer> tok;
  ASSERT_TRUE(make_bpe_tokenizer(byte_vocab(""), log, &tok).is_ok());
  EXPECT_EQ(warnings, 1);
  EXPECT_EQ(static_cast<const BpeTokenizer*>(tok.get())->pre_tokenizer(), PreTokenizer::DEFAULT);
  ASSERT_TRUE(make_bpe_tokenizer(byte_vocab("tekken"), log, &tok).is_ok());
  EXPECT_EQ(static_cast<const BpeTokenizer*>(tok.get())->pre_tokenizer(), PreTokenizer::TEKKEN);
  EXPECT_EQ(warnings, 1);
  tok.reset();
  const Status st = make_bpe_tokenizer(byte_vocab("no-such-pre"), log, &tok);
  EXPECT_EQ(st.code(), GEIST_E_UNSUPPORTED);
  EXPECT_NE(st.message().find("'no-such-pre'"), std::string::npos) << st.message();
  EXPECT_EQ(tok, nullptr);
}

}  // namespace
}  // namespace geist
