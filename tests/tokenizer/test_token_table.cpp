// The flat vocabulary tables against the standard containers they replace.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/token_table.h"

namespace geist {
namespace {

// Short random strings over a small alphabet, so that many share prefixes and some repeat.
std::vector<std::string> random_strings(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string s(rng() % 7, '\0');
    for (char& c : s) c = static_cast<char>("ab\0\xE2\x96\x81 z"[rng() % 7]);
    out.push_back(std::move(s));
  }
  return out;
}

TEST(TokenTable, MatchesUnorderedMapWithDuplicatesAndGrowth) {
  // Grows from empty through many rehashes; duplicates keep their first index, as the
  // unordered_map's emplace does, and are not appended.
  TokenTable t;
  std::unordered_map<std::string, int32_t> ref;
  std::vector<std::string> texts;  // by index
  for (const std::string& s : random_strings(20000, 1)) {
    int32_t existing = -2;
    const bool added = t.push_back(s, &existing);
    const auto [it, ref_added] = ref.emplace(s, static_cast<int32_t>(texts.size()));
    ASSERT_EQ(added, ref_added) << s;
    if (added) {
      texts.push_back(s);
      EXPECT_EQ(existing, -2);  // untouched
    } else {
      EXPECT_EQ(existing, it->second);
    }
  }
  ASSERT_EQ(static_cast<size_t>(t.size()), texts.size());
  ASSERT_GT(texts.size(), 1000u);  // the alphabet leaves plenty of distinct strings
  for (int32_t id = 0; id < t.size(); ++id) {
    EXPECT_EQ(t[id], texts[id]);
    EXPECT_EQ(t.find(texts[id]), id);
  }
  // Misses, including prefixes and extensions of present texts.
  for (const std::string& s : random_strings(5000, 2)) {
    const auto it = ref.find(s);
    EXPECT_EQ(t.find(s), it == ref.end() ? -1 : it->second) << s;
  }
  EXPECT_EQ(t.find(std::string(40, 'a')), -1);
}

TEST(TokenTable, EmptyStringsAndEmbeddedNuls) {
  TokenTable t;
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.find(""), -1);
  EXPECT_EQ(t.find("a"), -1);
  ASSERT_TRUE(t.push_back("a"));
  EXPECT_EQ(t.find(""), -1);
  ASSERT_TRUE(t.push_back(""));
  ASSERT_TRUE(t.push_back(std::string_view("a\0b", 3)));
  ASSERT_TRUE(t.push_back(std::string_view("a\0", 2)));
  EXPECT_EQ(t.find(""), 1);
  EXPECT_EQ(t[1], "");
  EXPECT_EQ(t.find(std::string_view("a\0b", 3)), 2);
  EXPECT_EQ(t.find(std::string_view("a\0", 2)), 3);
  EXPECT_EQ(t.find("a"), 0);
  EXPECT_FALSE(t.push_back(""));
  EXPECT_EQ(t.size(), 4);
}

TEST(TokenTable, ReserveThenFillAndClear) {
  TokenTable t;
  t.reserve(3, 6);
  ASSERT_TRUE(t.push_back("ab"));
  ASSERT_TRUE(t.push_back("cd"));
  ASSERT_TRUE(t.push_back("ef"));
  EXPECT_EQ(t.find("cd"), 1);
  EXPECT_EQ(t[2], "ef");
  t.clear();
  EXPECT_EQ(t.size(), 0);
  EXPECT_EQ(t.find("ab"), -1);
  EXPECT_LT(t.memory_bytes(), sizeof(std::string));  // only the inline buffer left
  ASSERT_TRUE(t.push_back("cd"));
  EXPECT_EQ(t.find("cd"), 0);
}

TEST(StringList, KeepsOrderDuplicatesAndEmpties) {
  StringList l;
  for (const char* s : {"a b", "", "a b", "c"}) l.push_back(s);
  ASSERT_EQ(l.size(), 4);
  EXPECT_EQ(l[0], "a b");
  EXPECT_EQ(l[1], "");
  EXPECT_EQ(l[2], "a b");
  EXPECT_EQ(l[3], "c");
  l.clear();
  EXPECT_TRUE(l.empty());
  EXPECT_LT(l.memory_bytes(), sizeof(std::string));  // only the inline buffer left
}

TEST(MergeTable, MatchesMapFirstInsertWins) {
  // Keys from a small range so that pairs repeat and probe chains form; (a,b) and (b,a) are
  // different rules.
  MergeTable m;
  std::map<std::pair<int32_t, int32_t>, MergeTable::Rule> ref;
  std::mt19937 rng(3);
  for (int32_t rank = 0; rank < 30000; ++rank) {
    const auto l = static_cast<int32_t>(rng() % 300);
    const auto r = static_cast<int32_t>(rng() % 300);
    const auto result = static_cast<int32_t>(rng() % 1000) - 1;  // -1 allowed
    const bool added = m.insert(l, r, rank, result);
    EXPECT_EQ(added, ref.emplace(std::make_pair(l, r), MergeTable::Rule{rank, result}).second);
  }
  EXPECT_EQ(static_cast<size_t>(m.size()), ref.size());
  for (int32_t l = 0; l < 300; ++l) {
    for (int32_t r = 0; r < 300; ++r) {
      const MergeTable::Rule got = m.find(l, r);
      const auto it = ref.find({l, r});
      if (it == ref.end()) {
        EXPECT_EQ(got.rank, -1);
      } else {
        EXPECT_EQ(got.rank, it->second.rank);
        EXPECT_EQ(got.result, it->second.result);
      }
    }
  }
  // Keys a symbol without a key (-1) or far outside the range never match.
  EXPECT_EQ(m.find(-1, 0).rank, -1);
  EXPECT_EQ(m.find(0, -1).rank, -1);
  EXPECT_EQ(m.find(1 << 30, 5).rank, -1);
  EXPECT_EQ(MergeTable().find(0, 0).rank, -1);
}

}  // namespace
}  // namespace geist
