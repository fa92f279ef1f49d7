// Unicode support for the tokenizers: UTF-8 coding, general categories, White_Space, simple
// lowercase, canonical decomposition (NFD) and the CJK ideograph check BERT uses. The tables
// are generated from Python's unicodedata by scripts/gen_unicode_tables.py (the Unicode
// version is stated in unicode_tables.inc). All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace geist::unicode {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;
inline constexpr uint32_t kReplacement = 0xFFFD;

// ---- UTF-8 ----------------------------------------------------------------------------------

struct Utf8Char {
  uint32_t cp;   // the code point; kReplacement when !valid
  uint32_t len;  // bytes consumed, >= 1 (1 for an invalid byte)
  bool valid;    // false: truncated, overlong, surrogate, > U+10FFFF or a stray continuation
};

// Decodes the code point at the start of `s` (which must be non-empty). An invalid sequence
// consumes exactly one byte, so a decoder loop always makes progress and every byte of the
// input is accounted for exactly once.
Utf8Char utf8_decode(std::string_view s);

// Appends the UTF-8 encoding of `cp` (surrogates and values > U+10FFFF become U+FFFD).
void utf8_append(uint32_t cp, std::string* out);
std::string utf8_encode(uint32_t cp);

// Code points of `s`; each invalid byte becomes U+FFFD (the usual lossy decode).
std::vector<uint32_t> utf8_to_cpts(std::string_view s);
std::string cpts_to_utf8(const std::vector<uint32_t>& cpts);

// ---- General category ---------------------------------------------------------------------

// Unicode General_Category (UAX #44). Unassigned code points are Cn.
enum class Category : uint8_t {
  Cn = 0,  // unassigned
  Lu,
  Ll,
  Lt,
  Lm,
  Lo,
  Mn,
  Mc,
  Me,
  Nd,
  Nl,
  No,
  Pc,
  Pd,
  Ps,
  Pe,
  Pi,
  Pf,
  Po,
  Sm,
  Sc,
  Sk,
  So,
  Zs,
  Zl,
  Zp,
  Cc,
  Cf,
  Cs,
  Co,
};

Category category(uint32_t cp);

// The major classes, as regex \p{L}, \p{M}, \p{N}, \p{P}, \p{S}, \p{Z}, \p{C} see them.
bool is_letter(uint32_t cp);       // L*
bool is_mark(uint32_t cp);         // M*  ("accent marks"; Mn alone: category(cp) == Category::Mn)
bool is_number(uint32_t cp);       // N*
bool is_punctuation(uint32_t cp);  // P*
bool is_symbol(uint32_t cp);       // S*
bool is_separator(uint32_t cp);    // Z*
bool is_control(uint32_t cp);      // Cc
bool is_other(uint32_t cp);        // C* (Cn, Cc, Cf, Cs, Co)

// The White_Space property (what regex \s matches in Unicode mode): U+0009..U+000D, U+0020,
// U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
bool is_whitespace(uint32_t cp);

// ---- Case and normalization -----------------------------------------------------------------

// Simple (one-to-one) lowercase mapping; code points without one map to themselves.
uint32_t to_lower(uint32_t cp);

// Appends the full canonical decomposition (NFD, without the canonical reordering of
// combining marks across code points) of one code point; Hangul syllables decompose
// algorithmically. Code points without a decomposition are appended unchanged.
void nfd_append(uint32_t cp, std::vector<uint32_t>* out);
std::vector<uint32_t> nfd(const std::vector<uint32_t>& cpts);

// BERT's accent stripping: NFD, then drop every nonspacing mark (Mn).
std::vector<uint32_t> strip_accents(const std::vector<uint32_t>& cpts);

// BERT's "Chinese character" ranges (CJK Unified Ideographs and extensions A-E,
// compatibility ideographs and their supplement).
bool is_cjk(uint32_t cp);

// ---- GPT-2 byte-level mapping ---------------------------------------------------------------

// GPT-2's reversible map from bytes to printable code points: bytes 0x21-0x7E, 0xA1-0xAC and
// 0xAE-0xFF map to themselves, the remaining 68 bytes to U+0100.. in byte order.
uint32_t byte_to_cpt(uint8_t b);
// Inverse of byte_to_cpt; false if `cp` is not in its image.
bool cpt_to_byte(uint32_t cp, uint8_t* b);

// The Unicode version the tables were generated from, e.g. "14.0.0".
const char* unicode_version();

}  // namespace geist::unicode
