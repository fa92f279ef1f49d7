#include "tokenizer/unicode.h"

#include <algorithm>
#include <iterator>

namespace geist::unicode {
namespace {

struct CategoryRun {
  uint32_t first;
  uint8_t category;  // Category
};
struct CodePointPair {
  uint32_t from;
  uint32_t to;
};
struct NfdEntry {
  uint32_t cp;
  uint16_t offset;  // into kNfdPool
  uint8_t len;
};

#include "tokenizer/unicode_tables.inc"

// Hangul syllable composition constants (Unicode 3.12, "Conjoining Jamo Behavior").
constexpr uint32_t kHangulSBase = 0xAC00, kHangulLBase = 0x1100, kHangulVBase = 0x1161,
                   kHangulTBase = 0x11A7;
constexpr uint32_t kHangulVCount = 21, kHangulTCount = 28, kHangulSCount = 11172;

bool is_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

}  // namespace

Utf8Char utf8_decode(std::string_view s) {
  const Utf8Char invalid{kReplacement, 1, false};
  const auto b0 = static_cast<uint8_t>(s[0]);
  if (b0 < 0x80) return {b0, 1, true};
  uint32_t len = 0, cp = 0, min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return invalid;  // stray continuation byte or 0xF8..0xFF
  }
  if (s.size() < len) return invalid;
  for (uint32_t i = 1; i < len; ++i) {
    const auto b = static_cast<uint8_t>(s[i]);
    if (!is_continuation(b)) return invalid;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) return invalid;
  return {cp, len, true};
}

void utf8_append(uint32_t cp, std::string* out) {
  if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacement;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string utf8_encode(uint32_t cp) {
  std::string s;
  utf8_append(cp, &s);
  return s;
}

std::vector<uint32_t> utf8_to_cpts(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  while (!s.empty()) {
    const Utf8Char c = utf8_decode(s);
    out.push_back(c.cp);
    s.remove_prefix(c.len);
  }
  return out;
}

std::string cpts_to_utf8(const std::vector<uint32_t>& cpts) {
  std::string out;
  out.reserve(cpts.size());
  for (uint32_t cp : cpts) utf8_append(cp, &out);
  return out;
}

Category category(uint32_t cp) {
  if (cp > kMaxCodePoint) return Category::Cn;
  // Last run whose first code point is <= cp (the table starts at U+0000).
  const auto it = std::upper_bound(std::begin(kCategoryRuns), std::end(kCategoryRuns), cp,
                                   [](uint32_t v, const CategoryRun& r) { return v < r.first; });
  return static_cast<Category>(std::prev(it)->category);
}

namespace {
bool in(Category c, Category lo, Category hi) { return c >= lo && c <= hi; }
}  // namespace

bool is_letter(uint32_t cp) { return in(category(cp), Category::Lu, Category::Lo); }
bool is_mark(uint32_t cp) { return in(category(cp), Category::Mn, Category::Me); }
bool is_number(uint32_t cp) { return in(category(cp), Category::Nd, Category::No); }
bool is_punctuation(uint32_t cp) { return in(category(cp), Category::Pc, Category::Po); }
bool is_symbol(uint32_t cp) { return in(category(cp), Category::Sm, Category::So); }
bool is_separator(uint32_t cp) { return in(category(cp), Category::Zs, Category::Zp); }
bool is_control(uint32_t cp) { return category(cp) == Category::Cc; }
bool is_other(uint32_t cp) {
  const Category c = category(cp);
  return c == Category::Cn || in(c, Category::Cc, Category::Co);
}

bool is_whitespace(uint32_t cp) {
  // White_Space (PropList.txt) is small and has been stable since Unicode 6.3; unicodedata
  // does not expose it, so it is spelled out here.
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

uint32_t to_lower(uint32_t cp) {
  const auto it = std::lower_bound(std::begin(kLowerMap), std::end(kLowerMap), cp,
                                   [](const CodePointPair& p, uint32_t v) { return p.from < v; });
  return (it != std::end(kLowerMap) && it->from == cp) ? it->to : cp;
}

void nfd_append(uint32_t cp, std::vector<uint32_t>* out) {
  if (cp >= kHangulSBase && cp < kHangulSBase + kHangulSCount) {
    const uint32_t s = cp - kHangulSBase;
    out->push_back(kHangulLBase + s / (kHangulVCount * kHangulTCount));
    out->push_back(kHangulVBase + (s % (kHangulVCount * kHangulTCount)) / kHangulTCount);
    if (s % kHangulTCount != 0) out->push_back(kHangulTBase + s % kHangulTCount);
    return;
  }
  const auto it = std::lower_bound(std::begin(kNfdIndex), std::end(kNfdIndex), cp,
                                   [](const NfdEntry& e, uint32_t v) { return e.cp < v; });
  if (it == std::end(kNfdIndex) || it->cp != cp) {
    out->push_back(cp);
    return;
  }
  out->insert(out->end(), kNfdPool + it->offset, kNfdPool + it->offset + it->len);
}

std::vector<uint32_t> nfd(const std::vector<uint32_t>& cpts) {
  std::vector<uint32_t> out;
  out.reserve(cpts.size());
  for (uint32_t cp : cpts) nfd_append(cp, &out);
  return out;
}

std::vector<uint32_t> strip_accents(const std::vector<uint32_t>& cpts) {
  std::vector<uint32_t> out = nfd(cpts);
  out.erase(std::remove_if(out.begin(), out.end(),
                           [](uint32_t cp) { return category(cp) == Category::Mn; }),
            out.end());
  return out;
}

bool is_cjk(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

namespace {
// Bytes that GPT-2 keeps as their own code point (printable Latin-1 minus the soft hyphen).
bool byte_is_printable(uint32_t b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}
}  // namespace

uint32_t byte_to_cpt(uint8_t b) {
  if (byte_is_printable(b)) return b;
  // The others take U+0100 + their rank among the non-printable bytes: 0x00..0x20 (33 bytes),
  // 0x7F..0xA0 (34 bytes), 0xAD.
  if (b <= 0x20) return 0x100 + b;
  if (b <= 0xA0) return 0x100 + 33 + (b - 0x7F);
  return 0x100 + 67;  // 0xAD
}

bool cpt_to_byte(uint32_t cp, uint8_t* b) {
  if (cp <= 0xFF) {
    if (!byte_is_printable(cp)) return false;
    *b = static_cast<uint8_t>(cp);
    return true;
  }
  if (cp < 0x100 || cp > 0x100 + 67) return false;
  const uint32_t r = cp - 0x100;
  if (r < 33) {
    *b = static_cast<uint8_t>(r);
  } else if (r < 67) {
    *b = static_cast<uint8_t>(0x7F + (r - 33));
  } else {
    *b = 0xAD;
  }
  return true;
}

const char* unicode_version() { return kUnicodeVersion; }

}  // namespace geist::unicode
