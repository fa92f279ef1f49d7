#include "tokenizer/pretokenize.h"

#include <algorithm>
#include <initializer_list>
#include <span>

#include "tokenizer/unicode.h"

namespace geist {
namespace {

// Category bits of one code point, computed once per input.
enum : uint8_t { kL = 1, kN = 2, kM = 4, kP = 8, kS = 16, kWs = 32 };

uint8_t flags_of(uint32_t cp) {
  uint8_t f = unicode::is_whitespace(cp) ? kWs : 0;
  switch (unicode::category(cp)) {
    case unicode::Category::Lu:
    case unicode::Category::Ll:
    case unicode::Category::Lt:
    case unicode::Category::Lm:
    case unicode::Category::Lo:
      return f | kL;
    case unicode::Category::Mn:
    case unicode::Category::Mc:
    case unicode::Category::Me:
      return f | kM;
    case unicode::Category::Nd:
    case unicode::Category::Nl:
    case unicode::Category::No:
      return f | kN;
    case unicode::Category::Pc:
    case unicode::Category::Pd:
    case unicode::Category::Ps:
    case unicode::Category::Pe:
    case unicode::Category::Pi:
    case unicode::Category::Pf:
    case unicode::Category::Po:
      return f | kP;
    case unicode::Category::Sm:
    case unicode::Category::Sc:
    case unicode::Category::Sk:
    case unicode::Category::So:
      return f | kS;
    default:
      return f;
  }
}

// One piece of the input under a pass. Indices past the end read as "no character", which is
// what a regex sees at the end of its subject (\S and classes fail, (?!\S) succeeds).
struct View {
  const uint32_t* c;  // [n] code points
  const uint8_t* f;   // [n] flags_of(c[i])
  size_t n;

  bool has(size_t i, uint8_t bits) const { return i < n && (f[i] & bits) != 0; }
  bool ws(size_t i) const { return has(i, kWs); }
  bool is(size_t i, uint32_t cp) const { return i < n && c[i] == cp; }
  bool crlf(size_t i) const { return is(i, '\r') || is(i, '\n'); }
  // The code point as llama.cpp's std::wregex passes see it: non-ASCII whitespace is replaced
  // by U+000B there, so it never matches a literal range such as U+0800..U+4E00.
  uint32_t wcp(size_t i) const { return (c[i] > 0x7F && (f[i] & kWs)) ? 0x0B : c[i]; }

  template <typename Pred>
  size_t run(size_t i, Pred pred) const {
    size_t j = i;
    while (j < n && pred(j)) ++j;
    return j - i;
  }
};

using Matcher = size_t (*)(const View& v, size_t p);  // match length at p, 0 for none
using Splitter = void (*)(const View& v, std::vector<size_t>* lens);

// Leftmost-first search as a regex iterator does it: every match and every gap between matches
// becomes a piece. None of the patterns can match the empty string.
template <Matcher M>
void split_leftmost(const View& v, std::vector<size_t>* lens) {
  size_t gap = 0, p = 0;
  while (p < v.n) {
    const size_t len = M(v, p);
    if (len == 0) {
      ++p;
      continue;
    }
    if (p > gap) lens->push_back(p - gap);
    lens->push_back(len);
    p += len;
    gap = p;
  }
  if (v.n > gap) lens->push_back(v.n - gap);
}

uint32_t ascii_lower(uint32_t cp) { return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp; }

// 's|'t|'re|'ve|'m|'ll|'d, optionally case-insensitive (ASCII letters only, as [sS] spells it).
size_t match_contraction(const View& v, size_t p, bool icase) {
  if (!v.is(p, '\'') || p + 1 >= v.n) return 0;
  auto at = [&](size_t i) { return i < v.n ? (icase ? ascii_lower(v.c[i]) : v.c[i]) : 0u; };
  const uint32_t a = at(p + 1), b = at(p + 2);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// \s+(?!\S)|\s+ at a whitespace run: leave the run's last character to the next word.
size_t match_ws_tail(const View& v, size_t p) {
  const size_t k = v.run(p, [&](size_t i) { return v.ws(i); });
  if (k == 0) return 0;
  return (k > 1 && p + k < v.n) ? k - 1 : k;
}

// \s*[\r\n]+|\s+(?!\S)|\s+ : \s* backtracks to the last CR/LF of the whitespace run.
size_t match_ws_newlines(const View& v, size_t p) {
  const size_t k = v.run(p, [&](size_t i) { return v.ws(i); });
  for (size_t i = p + k; i > p; --i) {
    if (v.crlf(i - 1)) return i - p;
  }
  return match_ws_tail(v, p);
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t match_gpt2(const View& v, size_t p) {
  if (size_t k = match_contraction(v, p, false)) return k;
  // With a leading space the space-less variants cannot match (a space is \s), so only the
  // variant with the space needs trying.
  const size_t q = p + (v.c[p] == ' ' ? 1 : 0);
  if (v.has(q, kL)) return q - p + v.run(q, [&](size_t i) { return v.has(i, kL); });
  if (v.has(q, kN)) return q - p + v.run(q, [&](size_t i) { return v.has(i, kN); });
  auto other = [&](size_t i) { return i < v.n && !v.has(i, kWs | kL | kN); };
  if (other(q)) return q - p + v.run(q, other);
  return match_ws_tail(v, p);
}

// The Llama 3 family:
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?W+|\p{N}{1,D}| ?[^\s\p{L}\p{N}X]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+
// with W = \p{L} (or [\p{L}\p{M}] when kMarks, X = \p{M} then), D = kMaxDigits, and the
// [\r\n]* after punctuation only when kPunctNewlines.
template <size_t kMaxDigits, bool kMarks, bool kPunctNewlines>
size_t match_llama3(const View& v, size_t p) {
  if (size_t k = match_contraction(v, p, true)) return k;
  const uint8_t word = kMarks ? (kL | kM) : kL;
  auto in_word = [&](size_t i) { return v.has(i, word); };
  const bool prefix_ok = !v.crlf(p) && !v.has(p, kL | kN);
  if (prefix_ok && in_word(p + 1)) return 1 + v.run(p + 1, in_word);
  if (in_word(p)) return v.run(p, in_word);
  if (v.has(p, kN)) {
    return std::min(kMaxDigits, v.run(p, [&](size_t i) { return v.has(i, kN); }));
  }
  const uint8_t not_punct = kWs | kL | kN | (kMarks ? kM : 0);
  auto punct = [&](size_t i) { return i < v.n && !v.has(i, not_punct); };
  const size_t q = p + (v.c[p] == ' ' ? 1 : 0);
  if (punct(q)) {
    size_t e = q + v.run(q, punct);
    if (kPunctNewlines) e += v.run(e, [&](size_t i) { return v.crlf(i); });
    return e - p;
  }
  return match_ws_newlines(v, p);
}

// Tekken (Mistral Nemo / Small 3) and GPT-4o, as llama.cpp adapts them:
// [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+C?|
// [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*C?|
// \p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// with D = kMaxDigits and the contraction C (case-insensitive) only when kContractions. An
// "upper" letter is any letter but a-z, a "lower" one any but A-Z: non-ASCII letters are both
// (llama.cpp's adaptation; the tokenizer.json regex uses Lu/Lt/Lm/Lo/M and Ll/Lm/Lo/M).
template <size_t kMaxDigits, bool kContractions>
size_t match_cased_words(const View& v, size_t p) {
  auto upper = [&](size_t i) { return v.has(i, kL) && !(v.c[i] >= 'a' && v.c[i] <= 'z'); };
  auto lower = [&](size_t i) { return v.has(i, kL) && !(v.c[i] >= 'A' && v.c[i] <= 'Z'); };
  // The two letter alternatives at q: U*L+ backtracks its U* until a lower letter follows;
  // failing that U+L* is the upper run alone (a lower letter after it would have matched).
  auto letters = [&](size_t q) -> size_t {
    const size_t n_upper = v.run(q, upper);
    for (size_t k = n_upper + 1; k-- > 0;) {
      if (lower(q + k)) return k + v.run(q + k, lower);
    }
    return n_upper;
  };
  // The optional prefix only matters before letters: without it a non-letter cannot start them.
  const bool prefix = !v.crlf(p) && !v.has(p, kL | kN);
  const size_t q = p + (prefix ? 1 : 0);
  if (const size_t w = letters(q); w > 0) {
    const size_t e = q + w;
    return e - p + (kContractions ? match_contraction(v, e, true) : 0);
  }
  if (v.has(p, kN)) {
    return std::min(kMaxDigits, v.run(p, [&](size_t i) { return v.has(i, kN); }));
  }
  auto punct = [&](size_t i) { return i < v.n && !v.has(i, kWs | kL | kN); };
  const size_t r = p + (v.c[p] == ' ' ? 1 : 0);
  if (punct(r)) {
    const size_t e = r + v.run(r, punct);
    return e - p + v.run(e, [&](size_t i) { return v.crlf(i) || v.is(i, '/'); });
  }
  return match_ws_newlines(v, p);
}

// [\p{P}\$\+<=>\^~\|]+ (default) and the same with a backtick (falcon).
template <bool kBacktick>
size_t match_punct_run(const View& v, size_t p) {
  auto in = [&](size_t i) {
    if (v.has(i, kP)) return true;
    const uint32_t c = v.c[i];
    return c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' || c == '~' ||
           c == '|' || (kBacktick && c == '`');
  };
  return v.run(p, in);
}

size_t match_number_run(const View& v, size_t p) {
  return v.run(p, [&](size_t i) { return v.has(i, kN); });
}
size_t match_number_one(const View& v, size_t p) { return v.has(p, kN) ? 1 : 0; }
size_t match_ascii_digits3(const View& v, size_t p) {
  auto d = [&](size_t i) { return i < v.n && v.c[i] >= '0' && v.c[i] <= '9'; };
  return (d(p) && d(p + 1) && d(p + 2)) ? 3 : 0;
}
size_t match_crlf_one(const View& v, size_t p) { return v.crlf(p) ? 1 : 0; }

struct Range {
  uint32_t lo, hi;
};
bool in_ranges(std::span<const Range> r, uint32_t cp) {
  return std::any_of(r.begin(), r.end(), [&](const Range& x) { return cp >= x.lo && cp <= x.hi; });
}

// The literal class of DeepSeek LLM's letter pass (the cased letters, Lu/Ll/Lt, spelled as
// ranges in the tokenizer's regex).
constexpr Range kDeepseekLetters[] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},
    {0xD8, 0xF6},       {0xF8, 0x1BA},      {0x1BC, 0x1BF},     {0x1C4, 0x293},
    {0x295, 0x2AF},     {0x370, 0x373},     {0x376, 0x377},     {0x37B, 0x37D},
    {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},     {0x38C, 0x38C},
    {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},
    {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},
    {0x1C90, 0x1CBA},   {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},
    {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},   {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},
    {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},   {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},
    {0x1FD6, 0x1FDB},   {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},
    {0x2102, 0x2102},   {0x2107, 0x2107},   {0x210A, 0x2113},   {0x2115, 0x2115},
    {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},   {0x2128, 0x2128},
    {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},
    {0x2C7E, 0x2CE4},   {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},
    {0xA680, 0xA69B},   {0xA722, 0xA76F},   {0xA771, 0xA787},   {0xA78B, 0xA78E},
    {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},   {0xFF21, 0xFF3A},
    {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
// ASCII punctuation and symbols, their full-width forms, curly quotes, ideographic space..full
// stop.
constexpr Range kDeepseekPunct[] = {{0x21, 0x2F},     {0x3A, 0x7E},     {0xFF01, 0xFF0F},
                                    {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002}};
// [一-龥ࠀ-一가-퟿]: CJK ideographs, U+0800..U+4E00, Hangul syllables and Jamo extension B.
constexpr Range kDeepseekCjk[] = {{0x4E00, 0x9FA5}, {0x800, 0x4E00}, {0xAC00, 0xD7FF}};

// \s?[R]+ where R is a literal class (std::wregex semantics, see View::wcp).
template <const Range* R, size_t N>
size_t match_ws_opt_ranges(const View& v, size_t p) {
  const std::span<const Range> r(R, N);
  auto in = [&](size_t i) { return i < v.n && in_ranges(r, v.wcp(i)); };
  if (v.ws(p) && in(p + 1)) return 1 + v.run(p + 1, in);
  return v.run(p, in);
}
template <const Range* R, size_t N>
size_t match_ranges(const View& v, size_t p) {
  const std::span<const Range> r(R, N);
  return v.run(p, [&](size_t i) { return in_ranges(r, v.wcp(i)); });
}
// \s?\p{X}+ for a category bit.
template <uint8_t kBit>
size_t match_ws_opt_class(const View& v, size_t p) {
  auto in = [&](size_t i) { return v.has(i, kBit); };
  if (v.ws(p) && in(p + 1)) return 1 + v.run(p + 1, in);
  return v.run(p, in);
}

// \s+$ : the whitespace run that ends the piece.
void split_trailing_ws(const View& v, std::vector<size_t>* lens) {
  size_t t = v.n;
  while (t > 0 && v.ws(t - 1)) --t;
  if (t > 0) lens->push_back(t);
  if (t < v.n) lens->push_back(v.n - t);
}

//  ?[^(\s|.,!?…。，、।۔،)]+
size_t match_poro(const View& v, size_t p) {
  auto in = [&](size_t i) {
    if (i >= v.n || v.ws(i)) return false;
    switch (v.c[i]) {
      case '(':
      case ')':
      case '|':
      case '.':
      case ',':
      case '!':
      case '?':
      case 0x2026:
      case 0x3002:
      case 0xFF0C:
      case 0x3001:
      case 0x0964:
      case 0x06D4:
      case 0x060C:
        return false;
      default:
        return true;
    }
  };
  const size_t q = p + (v.c[p] == ' ' ? 1 : 0);
  if (in(q)) return q - p + v.run(q, in);
  return 0;
}

constexpr size_t kDsL = std::size(kDeepseekLetters), kDsP = std::size(kDeepseekPunct),
                 kDsC = std::size(kDeepseekCjk);

std::span<const Splitter> passes_of(PreTokenizer type) {
  static constexpr Splitter kDefault[] = {
      split_leftmost<match_punct_run<false>>, split_leftmost<match_gpt2>,
      split_leftmost<match_number_run>, split_leftmost<match_ascii_digits3>};
  static constexpr Splitter kGpt2[] = {split_leftmost<match_gpt2>};
  static constexpr Splitter kLlama3[] = {split_leftmost<match_llama3<3, false, true>>};
  static constexpr Splitter kQwen2[] = {split_leftmost<match_llama3<1, false, true>>};
  static constexpr Splitter kQwen35[] = {split_leftmost<match_llama3<1, true, true>>};
  static constexpr Splitter kSeedCoder[] = {split_leftmost<match_llama3<1, false, false>>};
  static constexpr Splitter kStarcoder[] = {split_leftmost<match_number_one>,
                                            split_leftmost<match_gpt2>};
  static constexpr Splitter kFalcon[] = {split_leftmost<match_punct_run<true>>,
                                         split_leftmost<match_gpt2>,
                                         split_leftmost<match_ascii_digits3>};
  static constexpr Splitter kDeepseekLlm[] = {
      split_leftmost<match_crlf_one>,
      split_leftmost<match_ws_opt_ranges<kDeepseekLetters, kDsL>>,
      split_leftmost<match_ws_opt_ranges<kDeepseekPunct, kDsP>>,
      split_trailing_ws,
      split_leftmost<match_ranges<kDeepseekCjk, kDsC>>,
      split_leftmost<match_number_run>};
  static constexpr Splitter kDeepseekCoder[] = {
      split_leftmost<match_crlf_one>, split_leftmost<match_ws_opt_class<kL>>,
      split_leftmost<match_ws_opt_class<kP>>, split_leftmost<match_ranges<kDeepseekCjk, kDsC>>,
      split_leftmost<match_number_one>};
  static constexpr Splitter kPoro[] = {split_leftmost<match_poro>};
  static constexpr Splitter kViking[] = {split_leftmost<match_poro>,
                                         split_leftmost<match_number_one>};
  static constexpr Splitter kTekken[] = {split_leftmost<match_cased_words<1, false>>};
  static constexpr Splitter kGpt4o[] = {split_leftmost<match_cased_words<3, true>>};
  switch (type) {
    case PreTokenizer::DEFAULT:
      return kDefault;
    case PreTokenizer::GPT2:
      return kGpt2;
    case PreTokenizer::LLAMA3:
      return kLlama3;
    case PreTokenizer::QWEN2:
      return kQwen2;
    case PreTokenizer::QWEN35:
      return kQwen35;
    case PreTokenizer::SEED_CODER:
      return kSeedCoder;
    case PreTokenizer::STARCODER:
      return kStarcoder;
    case PreTokenizer::FALCON:
      return kFalcon;
    case PreTokenizer::DEEPSEEK_LLM:
      return kDeepseekLlm;
    case PreTokenizer::DEEPSEEK_CODER:
      return kDeepseekCoder;
    case PreTokenizer::PORO:
      return kPoro;
    case PreTokenizer::VIKING:
      return kViking;
    case PreTokenizer::TEKKEN:
      return kTekken;
    case PreTokenizer::GPT4O:
      return kGpt4o;
  }
  return kDefault;
}

bool name_in(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

Status pre_tokenizer_from_name(std::string_view name, PreTokenizerInfo* out) {
  using P = PreTokenizer;
  auto set = [out](P type, bool ignore_merges = false) {
    *out = PreTokenizerInfo{type, ignore_merges};
    return Status::ok();
  };
  if (name.empty() || name == "default") return set(P::DEFAULT);
  if (name_in(name, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                     "midm-2.0", "lfm2", "jina-v5-nano"})) {
    return set(P::LLAMA3, true);
  }
  if (name_in(name, {"dbrx", "smaug-bpe", "glm4", "chatglm-bpe"})) return set(P::LLAMA3);
  if (name_in(name,
              {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
               "a.x-4.0", "mellum", "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe",
               "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4"})) {
    return set(P::GPT2);
  }
  // bailingmoe and grok-2 spell their regexes differently but split like qwen2.
  if (name_in(name, {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "stablelm2", "hunyuan",
                     "solar-open", "megrez", "grok-2", "bailingmoe", "bailingmoe2", "llada-moe"})) {
    return set(P::QWEN2);
  }
  if (name == "qwen35") return set(P::QWEN35);
  if (name == "seed-coder") return set(P::SEED_CODER);
  if (name_in(name, {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone",
                     "minerva-7b", "mellum2"})) {
    return set(P::STARCODER);
  }
  if (name == "falcon") return set(P::FALCON);
  if (name == "deepseek-llm") return set(P::DEEPSEEK_LLM);
  if (name == "deepseek-coder") return set(P::DEEPSEEK_CODER);
  if (name_in(name, {"poro-chat", "bloom", "gpt3-finnish"})) return set(P::PORO);
  if (name == "viking") return set(P::VIKING);
  if (name == "tekken") return set(P::TEKKEN, true);
  if (name_in(name, {"gpt-4o", "llama4", "kanana2", "talkie"})) return set(P::GPT4O, true);
  const int len = static_cast<int>(name.size());
  // Names llama.cpp maps to regexes (or custom splitters) geist does not have: none of them
  // belongs to a model family of the architectures geist runs.
  if (name_in(name, {"deepseek-v3",
                     "youtu",
                     "jais-2",
                     "gemma4",
                     "granite-embed-multi-311m",
                     "granite-embed-multi-97m",
                     "sarvam-moe",
                     "whitespace",
                     "minicpm5",
                     "exaone-moe",
                     "chameleon",
                     "tiny_aya",
                     "cohere2moe",
                     "superbpe",
                     "hunyuan-dense",
                     "joyai-llm",
                     "kimi-k2",
                     "afmoe",
                     "laguna",
                     "minimax-m2"})) {
    return Status::error(GEIST_E_UNSUPPORTED,
                         "tokenizer.ggml.pre '%.*s' (a pre-tokenizer llama.cpp knows) is not "
                         "supported by geist",
                         len, name.data());
  }
  return Status::error(GEIST_E_UNSUPPORTED, "tokenizer.ggml.pre '%.*s' is an unknown pre-tokenizer",
                       len, name.data());
}

std::vector<std::string_view> pre_tokenize(PreTokenizer type, std::string_view text) {
  std::vector<uint32_t> cps;    // [n] code points (U+FFFD for an invalid byte)
  std::vector<uint8_t> flags;   // [n] flags_of(cps[i])
  std::vector<size_t> byte_at;  // [n + 1] byte offset of cps[i] in text; byte_at[n] = size
  cps.reserve(text.size());
  byte_at.reserve(text.size() + 1);
  for (size_t b = 0; b < text.size();) {
    const unicode::Utf8Char ch = unicode::utf8_decode(text.substr(b));
    cps.push_back(ch.cp);
    byte_at.push_back(b);
    b += ch.len;
  }
  byte_at.push_back(text.size());
  flags.resize(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) flags[i] = flags_of(cps[i]);

  std::vector<size_t> lens;  // piece lengths in code points, in order
  if (!cps.empty()) lens.push_back(cps.size());
  std::vector<size_t> next;
  for (Splitter split : passes_of(type)) {
    next.clear();
    size_t start = 0;
    for (size_t len : lens) {
      split(View{cps.data() + start, flags.data() + start, len}, &next);
      start += len;
    }
    lens.swap(next);
  }

  std::vector<std::string_view> pieces;
  pieces.reserve(lens.size());
  size_t start = 0;
  for (size_t len : lens) {
    pieces.push_back(text.substr(byte_at[start], byte_at[start + len] - byte_at[start]));
    start += len;
  }
  return pieces;
}

}  // namespace geist
