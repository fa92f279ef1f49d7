// Unicode tables and UTF-8 coding. Expected values are the Unicode Character Database's
// (UnicodeData.txt fields 2, 5 and 13; PropList.txt White_Space) for the named code points.
#include <gtest/gtest.h>

#include <cctype>

#include "tokenizer/unicode.h"

namespace geist::unicode {
namespace {

TEST(Unicode, GeneralCategoryOfKnownCodePoints) {
  const struct {
    uint32_t cp;
    Category cat;
  } cases[] = {
      {'A', Category::Lu},      {'a', Category::Ll},    {0x01C5, Category::Lt},  // Dž
      {0x02B0, Category::Lm},   {0x05D0, Category::Lo},                          // ʰ, alef
      {0x4E2D, Category::Lo},   {0x0301, Category::Mn}, {0x0903, Category::Mc},
      {0x20DD, Category::Me},   {'5', Category::Nd},    {0x0663, Category::Nd},  // Arabic 3
      {0x2163, Category::Nl},   {0x00BD, Category::No}, {'_', Category::Pc},
      {'-', Category::Pd},      {'(', Category::Ps},    {')', Category::Pe},
      {0x00AB, Category::Pi},   {0x00BB, Category::Pf}, {'!', Category::Po},
      {0x3002, Category::Po},   {'+', Category::Sm},    {'$', Category::Sc},
      {'^', Category::Sk},      {'`', Category::Sk},    {0x00A9, Category::So},
      {0x1F600, Category::So},  {' ', Category::Zs},    {0x3000, Category::Zs},
      {0x2028, Category::Zl},   {0x2029, Category::Zp}, {0x0000, Category::Cc},
      {0x0085, Category::Cc},   {0x200B, Category::Cf}, {0xD800, Category::Cs},
      {0xE000, Category::Co},   {0x0378, Category::Cn}, {0x10FFFF, Category::Cn},
      {0x110000, Category::Cn},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(static_cast<int>(category(c.cp)), static_cast<int>(c.cat)) << std::hex << c.cp;
  }
  EXPECT_TRUE(is_letter(0x4E2D));
  EXPECT_TRUE(is_mark(0x0301));
  EXPECT_TRUE(is_number(0x2163));
  EXPECT_TRUE(is_punctuation(0x00AB));
  EXPECT_TRUE(is_symbol('$'));
  EXPECT_TRUE(is_separator(0x2029));
  EXPECT_TRUE(is_control(0x7F));
  EXPECT_TRUE(is_other(0x0378));
  EXPECT_FALSE(is_letter('1'));
}

// For ASCII the C library's classification (C locale) is the same partition: alpha = L,
// digit = N, space = White_Space, cntrl = Cc, punct = P or S.
TEST(Unicode, AsciiAgreesWithCClassification) {
  for (int c = 0; c < 128; ++c) {
    EXPECT_EQ(is_letter(c), std::isalpha(c) != 0) << c;
    EXPECT_EQ(is_number(c), std::isdigit(c) != 0) << c;
    EXPECT_EQ(is_whitespace(c), std::isspace(c) != 0) << c;
    EXPECT_EQ(is_control(c), std::iscntrl(c) != 0) << c;
    EXPECT_EQ(is_punctuation(c) || is_symbol(c), std::ispunct(c) != 0) << c;
  }
}

TEST(Unicode, WhiteSpaceProperty) {
  for (uint32_t cp : {0x09u, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u, 0x200Au, 0x2028u,
                      0x2029u, 0x202Fu, 0x205Fu, 0x3000u}) {
    EXPECT_TRUE(is_whitespace(cp)) << std::hex << cp;
  }
  // U+180E left White_Space in Unicode 6.3; ZWSP and the information separators never had it.
  for (uint32_t cp : {0x08u, 0x1Cu, 0x1Fu, 0x180Eu, 0x200Bu, 0xFEFFu, uint32_t('a')}) {
    EXPECT_FALSE(is_whitespace(cp)) << std::hex << cp;
  }
}

TEST(Unicode, SimpleLowercase) {
  EXPECT_EQ(to_lower('A'), uint32_t('a'));
  EXPECT_EQ(to_lower('a'), uint32_t('a'));
  EXPECT_EQ(to_lower('1'), uint32_t('1'));
  EXPECT_EQ(to_lower(0x00C0), 0x00E0u);    // À
  EXPECT_EQ(to_lower(0x0391), 0x03B1u);    // Α
  EXPECT_EQ(to_lower(0x0410), 0x0430u);    // А
  EXPECT_EQ(to_lower(0x0130), 0x0069u);    // İ: simple mapping is plain i
  EXPECT_EQ(to_lower(0x1E9E), 0x00DFu);    // ẞ
  EXPECT_EQ(to_lower(0x10400), 0x10428u);  // Deseret
  EXPECT_EQ(to_lower(0x4E2D), 0x4E2Du);
}

TEST(Unicode, CanonicalDecomposition) {
  std::vector<uint32_t> out;
  nfd_append(0x00E9, &out);  // é
  EXPECT_EQ(out, (std::vector<uint32_t>{0x65, 0x301}));
  out.clear();
  nfd_append(0x1E69, &out);  // ṩ: recursive, marks in canonical order
  EXPECT_EQ(out, (std::vector<uint32_t>{0x73, 0x323, 0x307}));
  out.clear();
  nfd_append(0x212B, &out);  // Å ANGSTROM SIGN (singleton) -> A + ring
  EXPECT_EQ(out, (std::vector<uint32_t>{0x41, 0x30A}));
  out.clear();
  nfd_append(0xAC00, &out);  // 가 (LV)
  EXPECT_EQ(out, (std::vector<uint32_t>{0x1100, 0x1161}));
  out.clear();
  nfd_append(0xD7A3, &out);  // 힣 (LVT), the last syllable
  EXPECT_EQ(out, (std::vector<uint32_t>{0x1112, 0x1175, 0x11C2}));
  out.clear();
  nfd_append('x', &out);
  EXPECT_EQ(out, (std::vector<uint32_t>{'x'}));
  EXPECT_EQ(strip_accents(utf8_to_cpts("Café Ñandú")), utf8_to_cpts("Cafe Nandu"));
}

TEST(Unicode, CjkRanges) {
  EXPECT_TRUE(is_cjk(0x4E00));
  EXPECT_TRUE(is_cjk(0x9FFF));
  EXPECT_TRUE(is_cjk(0x3400));
  EXPECT_TRUE(is_cjk(0x20000));
  EXPECT_TRUE(is_cjk(0xF900));
  EXPECT_FALSE(is_cjk(0x3042));  // hiragana
  EXPECT_FALSE(is_cjk(0xAC00));  // hangul
  EXPECT_FALSE(is_cjk('a'));
}

TEST(Unicode, Utf8RoundTripsEveryScalarValue) {
  for (uint32_t cp = 0; cp <= kMaxCodePoint; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    const std::string s = utf8_encode(cp);
    const size_t want = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    ASSERT_EQ(s.size(), want) << cp;
    const Utf8Char c = utf8_decode(s);
    ASSERT_TRUE(c.valid) << cp;
    ASSERT_EQ(c.cp, cp);
    ASSERT_EQ(c.len, want);
  }
  EXPECT_EQ(utf8_encode(0xD800), "\xEF\xBF\xBD");  // surrogates are not encodable
  EXPECT_EQ(utf8_encode(0x110000), "\xEF\xBF\xBD");
}

TEST(Unicode, Utf8RejectsMalformedSequencesOneByteAtATime) {
  for (const char* bad :
       {"\x80", "\xBF", "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xED\xA0\x80", "\xF0\x80\x80\x80",
        "\xF4\x90\x80\x80", "\xF8\x88\x80\x80\x80", "\xFF", "\xE4\xB8", "\xC3",
        "\xE4"
        "A"}) {
    const Utf8Char c = utf8_decode(bad);
    EXPECT_FALSE(c.valid) << bad;
    EXPECT_EQ(c.len, 1u);
    EXPECT_EQ(c.cp, kReplacement);
  }
  EXPECT_EQ(utf8_to_cpts("a\xE4\xB8"
                         "b"),
            (std::vector<uint32_t>{'a', kReplacement, kReplacement, 'b'}));
}

TEST(Unicode, Gpt2ByteMapIsTheKnownBijection) {
  // Fixed points and well-known images: ' ' -> 'Ġ' U+0120, '\n' -> 'Ċ' U+010A, 0xAD -> U+0143.
  EXPECT_EQ(byte_to_cpt('A'), uint32_t('A'));
  EXPECT_EQ(byte_to_cpt(0xA1), 0xA1u);
  EXPECT_EQ(byte_to_cpt(0x00), 0x100u);
  EXPECT_EQ(byte_to_cpt(' '), 0x120u);
  EXPECT_EQ(byte_to_cpt('\n'), 0x10Au);
  EXPECT_EQ(byte_to_cpt(0x7F), 0x121u);
  EXPECT_EQ(byte_to_cpt(0xA0), 0x142u);
  EXPECT_EQ(byte_to_cpt(0xAD), 0x143u);
  std::vector<bool> seen(0x200, false);
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = byte_to_cpt(static_cast<uint8_t>(b));
    ASSERT_LT(cp, 0x144u);
    EXPECT_FALSE(seen[cp]) << b;
    seen[cp] = true;
    uint8_t back = 0;
    ASSERT_TRUE(cpt_to_byte(cp, &back));
    EXPECT_EQ(back, b);
    // The image is printable: a letter, number, punctuation or symbol.
    EXPECT_TRUE(is_letter(cp) || is_number(cp) || is_punctuation(cp) || is_symbol(cp)) << b;
  }
  uint8_t b = 0;
  EXPECT_FALSE(cpt_to_byte(' ', &b));
  EXPECT_FALSE(cpt_to_byte(0x144, &b));
}

TEST(Unicode, VersionIsStated) { EXPECT_STRNE(unicode_version(), ""); }

}  // namespace
}  // namespace geist::unicode
