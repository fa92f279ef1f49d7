// WordPiece tokenizer ("bert" vocabularies). The GGUF converter stores word-initial pieces
// with a leading U+2581 and continuation pieces ("##x" in the original) bare, so a word is
// matched greedily, longest piece first, against "\u2581" + word.
#include <algorithm>

#include "tokenizer/tokenizer_base.h"
#include "tokenizer/unicode.h"

namespace geist {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581

class WpmTokenizer final : public TokenizerBase {
 public:
  WpmTokenizer(Vocab vocab, const Logger& log) : TokenizerBase(std::move(vocab), log) {
    for (int32_t id = 0; id < vocab_.n_vocab(); ++id) {
      max_token_len_ = std::max(max_token_len_, vocab_.tokens[id].size());
    }
  }

 protected:
  Status encode_fragment(std::string_view text, bool starts_text,
                         std::vector<int32_t>* out) const override;
  std::string piece_bytes(int32_t id) const override;
  bool adds_leading_space() const override { return true; }

 private:
  // BERT's basic tokenizer: drop control characters, optionally strip accents (NFD, then
  // drop marks) and lowercase, split at whitespace, and make every punctuation character,
  // ASCII symbol and CJK ideograph a word of its own.
  std::vector<std::string> split_words(std::string_view text) const;

  size_t max_token_len_ = 0;  // longest token text in bytes, bounds the match search
};

std::vector<std::string> WpmTokenizer::split_words(std::string_view text) const {
  std::vector<uint32_t> cpts = unicode::utf8_to_cpts(text);
  if (vocab_.strip_accents) cpts = unicode::nfd(cpts);
  std::vector<std::string> words(1);
  for (const uint32_t cp : cpts) {
    if (unicode::is_whitespace(cp)) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    if (cp == 0 || cp == unicode::kReplacement || unicode::is_other(cp)) continue;
    if (vocab_.strip_accents && unicode::is_mark(cp)) continue;
    const uint32_t c = vocab_.lowercase ? unicode::to_lower(cp) : cp;
    if (unicode::is_punctuation(cp) || (cp < 0x7F && unicode::is_symbol(cp)) ||
        unicode::is_cjk(cp)) {
      if (!words.back().empty()) words.emplace_back();
      unicode::utf8_append(c, &words.back());
      words.emplace_back();
    } else {
      unicode::utf8_append(c, &words.back());
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

Status WpmTokenizer::encode_fragment(std::string_view text, bool /*starts_text*/,
                                     std::vector<int32_t>* out) const {
  std::string w;
  for (const std::string& word : split_words(text)) {
    w.assign(kSpace);
    w += word;
    const size_t n = w.size();
    const size_t start = out->size();
    for (size_t i = 0; i < n;) {
      size_t j = std::min(n, i + max_token_len_);
      int32_t id = -1;
      for (; j > i; --j) {
        id = vocab_.tokens.find(std::string_view(w).substr(i, j - i));
        if (id >= 0) break;
      }
      if (id < 0) {  // a part of the word has no piece: the whole word is unknown
        out->resize(start);
        break;
      }
      out->push_back(id);
      i = j;
    }
    if (out->size() == start) {
      if (vocab_.unk < 0) {
        return Status(GEIST_E_INVALID_ARG,
                      "a word has no WordPiece cover and the vocabulary has no unknown token");
      }
      out->push_back(vocab_.unk);
    }
  }
  return Status::ok();
}

std::string WpmTokenizer::piece_bytes(int32_t id) const {
  const std::string_view t = vocab_.tokens[id];
  if (t.compare(0, kSpace.size(), kSpace) != 0) return std::string(t);
  std::string r(1, ' ');
  r.append(t, kSpace.size(), std::string::npos);
  return r;
}

}  // namespace

Status make_wpm_tokenizer(Vocab vocab, const Logger& log, std::unique_ptr<Tokenizer>* out) {
  *out = std::make_unique<WpmTokenizer>(std::move(vocab), log);
  return Status::ok();
}

}  // namespace geist
