// The CLI's helpers: UTF-8 aware streaming and token list parsing.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "cli_common.h"

namespace geist_cli {
namespace {

// "é" is C3 A9, "€" is E2 82 AC, "𝄞" is F0 9D 84 9E (from the UTF-8 definition, RFC 3629).
TEST(CliUtf8, CompletePrefixHoldsBackOnlyAnUnfinishedSequence) {
  EXPECT_EQ(utf8_complete_prefix(""), 0u);
  EXPECT_EQ(utf8_complete_prefix("abc"), 3u);
  EXPECT_EQ(utf8_complete_prefix("a\xC3"), 1u);
  EXPECT_EQ(utf8_complete_prefix("a\xC3\xA9"), 3u);
  EXPECT_EQ(utf8_complete_prefix("x\xE2\x82"), 1u);
  EXPECT_EQ(utf8_complete_prefix("x\xE2\x82\xAC"), 4u);
  EXPECT_EQ(utf8_complete_prefix("\xF0\x9D\x84"), 0u);
  EXPECT_EQ(utf8_complete_prefix("\xF0\x9D\x84\x9E"), 4u);
  // Stray continuation bytes can never complete: pass them through.
  EXPECT_EQ(utf8_complete_prefix("a\x80\x80\x80\x80"), 5u);
  // An invalid lead byte is not held either.
  EXPECT_EQ(utf8_complete_prefix("a\xFF"), 2u);
}

TEST(CliUtf8, StreamJoinsSplitCharacters) {
  FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  Utf8Stream s(f);
  const std::string pieces[] = {"caf", "\xC3", "\xA9 ", "\xE2", "\x82", "\xAC", "!", "\xF0"};
  std::string written_after_each;
  for (const std::string& p : pieces) {
    s.write(p.data(), p.size());
    written_after_each += std::to_string(std::ftell(f)) + ",";
  }
  s.finish();
  // Bytes appear only once the character they belong to is complete; finish() flushes the
  // dangling lead byte.
  EXPECT_EQ(written_after_each, "3,3,6,6,6,9,10,10,");
  std::rewind(f);
  char buf[64] = {0};
  const size_t n = std::fread(buf, 1, sizeof(buf), f);
  EXPECT_EQ(std::string(buf, n), "caf\xC3\xA9 \xE2\x82\xAC!\xF0");
  std::fclose(f);
}

TEST(CliTokens, ParsesCommaAndSpaceSeparatedIds) {
  std::vector<geist_token> ids;
  ASSERT_TRUE(parse_token_list("t", "1,403, 407 261", &ids));
  EXPECT_EQ(ids, (std::vector<geist_token>{1, 403, 407, 261}));
  EXPECT_FALSE(parse_token_list("t", "1,-2", &ids));
  EXPECT_FALSE(parse_token_list("t", "1,2x", &ids));
  EXPECT_FALSE(parse_token_list("t", "99999999999", &ids));
  EXPECT_FALSE(parse_token_list("t", ",,", &ids));
}

}  // namespace
}  // namespace geist_cli
