// Stop strings over streamed pieces, and the UTF-8 tail helper.
#include <gtest/gtest.h>

#include <random>

#include "chat/stop.h"

namespace geist::chat {
namespace {

struct StopRun {
  std::string out;
  bool stopped = false;
  int index = -1;
};

StopRun run(const std::vector<std::string>& stops, const std::vector<std::string>& pieces) {
  StopMatcher m(stops);
  StopRun r;
  for (const std::string& p : pieces) {
    if (m.feed(p, &r.out)) break;
  }
  m.finish(&r.out);
  r.stopped = m.stopped();
  r.index = m.matched_index();
  return r;
}

TEST(Stop, HoldsBackPossibleStart) {
  StopMatcher m({"</end>"});
  std::string out;
  EXPECT_FALSE(m.feed("Hello </e", &out));
  EXPECT_EQ(out, "Hello ");
  EXPECT_FALSE(m.feed("x", &out));
  EXPECT_EQ(out, "Hello </ex");
  m.finish(&out);
  EXPECT_EQ(out, "Hello </ex");
  EXPECT_FALSE(m.stopped());
}

TEST(Stop, MatchAcrossPiecesTruncates) {
  const StopRun r = run({"User:", "\n\n"}, {"Sure.", " Us", "er", ": more", " text"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.index, 0);
  EXPECT_EQ(r.out, "Sure. ");
}

TEST(Stop, EarliestAndLongestMatch) {
  EXPECT_EQ(run({"b", "ab"}, {"xab"}).index, 1);    // "ab" starts first
  EXPECT_EQ(run({"a", "abc"}, {"xabc"}).index, 1);  // same start: the longer one
  EXPECT_EQ(run({"a", "abc"}, {"xabc"}).out, "x");
  StopMatcher m({"", "zz"});
  std::string out;
  EXPECT_FALSE(m.feed("abc", &out));  // an empty stop string is ignored
  EXPECT_EQ(out, "abc");
  EXPECT_TRUE(m.feed("zz", &out));
  EXPECT_EQ(m.matched(), "zz");
  EXPECT_EQ(m.matched_index(), 1);
  EXPECT_FALSE(m.feed("more", &out));
  EXPECT_EQ(out, "abc");
}

TEST(Stop, NoStopsPassesThrough) {
  const StopRun r = run({}, {"a", "b"});
  EXPECT_EQ(r.out, "ab");
  EXPECT_FALSE(r.stopped);
}

TEST(Stop, SplitInvariance) {
  // Any split of the text gives the same output and the same decision as one piece.
  std::mt19937 rng(3);
  const std::vector<std::string> stops = {"<|im_end|>", "###", "aab"};
  const std::string alphabet = "a#b<|>imend_x";
  for (int iter = 0; iter < 500; ++iter) {
    std::string text;
    for (int i = 0, n = static_cast<int>(rng() % 30); i < n; ++i) {
      text += rng() % 10 == 0 ? std::string("<|im_end|>")
                              : std::string(1, alphabet[rng() % alphabet.size()]);
    }
    const StopRun whole = run(stops, {text});
    std::vector<std::string> pieces;
    for (size_t pos = 0; pos < text.size();) {
      const size_t k = std::min<size_t>(text.size() - pos, 1 + rng() % 4);
      pieces.push_back(text.substr(pos, k));
      pos += k;
    }
    const StopRun split = run(stops, pieces);
    ASSERT_EQ(split.out, whole.out) << text;
    ASSERT_EQ(split.index, whole.index) << text;
    // Reference: the earliest occurrence of any stop string.
    size_t first = std::string::npos;
    for (const std::string& s : stops) first = std::min(first, text.find(s));
    ASSERT_EQ(whole.out, text.substr(0, first)) << text;
  }
}

TEST(Utf8Tail, IncompleteSequences) {
  EXPECT_EQ(utf8_incomplete_tail(""), 0u);
  EXPECT_EQ(utf8_incomplete_tail("abc"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("a\xC3"), 1u);         // ü's lead byte
  EXPECT_EQ(utf8_incomplete_tail("a\xC3\xBC"), 0u);     // ü
  EXPECT_EQ(utf8_incomplete_tail("\xE4\xB8"), 2u);      // 世 missing one
  EXPECT_EQ(utf8_incomplete_tail("\xF0\x9F\x9A"), 3u);  // 🚀 missing one
  EXPECT_EQ(utf8_incomplete_tail("\xF0\x9F\x9A\x80"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("\x80\x80\x80\x80"), 0u);  // stray continuations
}

}  // namespace
}  // namespace geist::chat
