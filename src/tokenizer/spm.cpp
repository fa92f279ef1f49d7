// SentencePiece-style tokenizer ("llama" vocabularies): spaces become U+2581, then adjacent
// symbols are merged greedily by the score of the token they form, as llama.cpp does.
#include <cstdio>
#include <queue>

#include "tokenizer/tokenizer_base.h"

namespace geist {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

// Byte length of the UTF-8 sequence a lead byte starts; a stray continuation byte counts as
// one byte so that every byte of invalid input still becomes a symbol.
size_t utf8_len(unsigned char c) {
  static constexpr size_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[c >> 4];
}

class SpmTokenizer final : public TokenizerBase {
 public:
  SpmTokenizer(Vocab vocab, const Logger& log) : TokenizerBase(std::move(vocab), log) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      byte_token_[b] = vocab_.tokens.find(name);
    }
  }

 protected:
  Status encode_fragment(std::string_view text, bool starts_text,
                         std::vector<int32_t>* out) const override;
  std::string piece_bytes(int32_t id) const override;

 private:
  struct Symbol {
    int32_t prev, next;  // neighbours in the live chain, -1 at the ends
    size_t off, n;       // bytes [off, off + n) of the escaped text; n == 0 once merged away
  };
  struct Bigram {
    int32_t left, right;  // symbol indices
    float score;
    size_t size;  // bytes of the merged text; a mismatch later means the bigram is stale
  };
  struct Worse {
    // Highest score first; among equals the leftmost pair, which keeps merging deterministic.
    bool operator()(const Bigram& a, const Bigram& b) const {
      return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
  };
  using Queue = std::priority_queue<Bigram, std::vector<Bigram>, Worse>;

  int32_t lookup(std::string_view s) const { return vocab_.tokens.find(s); }
  void try_add(const std::string& text, const std::vector<Symbol>& syms, int32_t l, int32_t r,
               Queue* q) const {
    if (l < 0 || r < 0) return;
    const int32_t id = lookup(std::string_view(text).substr(syms[l].off, syms[l].n + syms[r].n));
    if (id < 0) return;
    q->push({l, r, vocab_.scores[id], syms[l].n + syms[r].n});
  }

  int32_t byte_token_[256];  // id of "<0xAB>" for each byte, -1 where the vocabulary lacks it
};

Status SpmTokenizer::encode_fragment(std::string_view text, bool starts_text,
                                     std::vector<int32_t>* out) const {
  std::string s;
  s.reserve(text.size() + 8);
  if (vocab_.add_space_prefix && starts_text) s.append(kSpace);
  for (char c : text) {
    if (c == ' ')
      s.append(kSpace);
    else
      s.push_back(c);
  }
  if (s.empty()) return Status::ok();

  std::vector<Symbol> syms;  // [n_chars] one per UTF-8 character at first
  syms.reserve(s.size());
  for (size_t off = 0; off < s.size();) {
    const size_t n = std::min(utf8_len(static_cast<unsigned char>(s[off])), s.size() - off);
    const int32_t i = static_cast<int32_t>(syms.size());
    syms.push_back({i - 1, off + n == s.size() ? -1 : i + 1, off, n});
    off += n;
  }

  Queue q;
  for (int32_t i = 1; i < static_cast<int32_t>(syms.size()); ++i) try_add(s, syms, i - 1, i, &q);
  while (!q.empty()) {
    const Bigram b = q.top();
    q.pop();
    Symbol& l = syms[b.left];
    Symbol& r = syms[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // one side changed since
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    try_add(s, syms, l.prev, b.left, &q);
    try_add(s, syms, b.left, l.next, &q);
  }

  // Every merged symbol is a token by construction; a single character may not be, and then
  // falls back to its bytes, or to the unknown token when the vocabulary has no byte tokens.
  for (int32_t i = 0; i >= 0; i = syms[i].next) {
    const std::string_view piece = std::string_view(s).substr(syms[i].off, syms[i].n);
    const int32_t id = lookup(piece);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    bool all_bytes = true;
    for (char c : piece) all_bytes = all_bytes && byte_token_[static_cast<unsigned char>(c)] >= 0;
    if (all_bytes) {
      for (char c : piece) out->push_back(byte_token_[static_cast<unsigned char>(c)]);
    } else if (vocab_.unk >= 0) {
      out->push_back(vocab_.unk);
    } else {
      return Status(GEIST_E_INVALID_ARG,
                    "text has a character that the vocabulary cannot represent (no byte tokens, "
                    "no unknown token)");
    }
  }
  return Status::ok();
}

std::string SpmTokenizer::piece_bytes(int32_t id) const {
  const std::string_view t = vocab_.tokens[id];
  if (vocab_.types[id] == TokenAttr::BYTE) {
    unsigned v = 0;
    // sscanf needs a terminated string; the table's texts are not.
    if (t.size() == 6 && std::sscanf(std::string(t).c_str(), "<0x%2X>", &v) == 1) {
      return std::string(1, static_cast<char>(v));
    }
    return std::string(t);  // a byte token not named <0xAB>: its text is the best we have
  }
  std::string r;
  r.reserve(t.size());
  for (size_t i = 0; i < t.size();) {
    if (t.compare(i, kSpace.size(), kSpace) == 0) {
      r.push_back(' ');
      i += kSpace.size();
    } else {
      r.push_back(t[i++]);
    }
  }
  return r;
}

}  // namespace

Status make_spm_tokenizer(Vocab vocab, const Logger& log, std::unique_ptr<Tokenizer>* out) {
  *out = std::make_unique<SpmTokenizer>(std::move(vocab), log);
  return Status::ok();
}

}  // namespace geist
