#include "tokenizer/bpe.h"

#include <queue>

#include "tokenizer/unicode.h"

namespace geist {
namespace {

// The UTF-8 character starting at byte `off` of `s` (valid UTF-8).
std::string_view unicode_char_at(std::string_view s, size_t off) {
  return s.substr(off, unicode::utf8_decode(s.substr(off)).len);
}

// A symbol of the word being merged; symbols only grow to the right, so (start, len) never
// repeats for different content and a queued pair can be checked for staleness by lengths.
struct Symbol {
  uint32_t start;  // byte offset in the word
  uint32_t len;    // bytes; 0 once merged into its left neighbour
  int32_t prev, next;
  int32_t key;  // BpeTokenizer::symbol_key of its text
};

struct Pair {
  int32_t rank;
  int32_t left, right;
  uint32_t left_len, right_len;  // lengths when queued
  int32_t result;                // key of the merged text
  // Lowest rank first, then leftmost.
  bool operator<(const Pair& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
};

}  // namespace

BpeTokenizer::BpeTokenizer(Vocab vocab, const Logger& log, PreTokenizerInfo pre)
    : TokenizerBase(std::move(vocab), log), pre_(pre) {
  build_merges();
  // A user-defined token whose text is not what its byte-level reading stands for (DeepSeek's
  // added "ÿ" etc., which decode to their UTF-8 text) would not give back the bytes it was
  // chosen for, so BPE never picks it; the special-token split still finds its literal text.
  usable_.resize(static_cast<size_t>(vocab_.n_vocab()), true);
  for (int32_t id = 0; id < vocab_.n_vocab(); ++id) {
    if (vocab_.types[id] == TokenAttr::USER_DEFINED)
      usable_[id] = piece_bytes(id) == vocab_.tokens[id];
  }
}

void BpeTokenizer::build_merges() {
  const StringList& list = vocab_.merges;
  // A rule applies to a pair of symbols whose texts are its two halves. A right half with a
  // space in it can never be a symbol, so such a rule (malformed) is left out; a half that is
  // not a token gets a key of its own first, so that the joined text of every rule can be
  // keyed below.
  auto split = [&](int32_t i, std::string_view* left, std::string_view* right) {
    const std::string_view m = list[i];
    const size_t sp = m.find(' ');
    if (sp == std::string_view::npos) return false;  // make_bpe_tokenizer refuses these
    *left = m.substr(0, sp);
    *right = m.substr(sp + 1);
    return right->find(' ') == std::string_view::npos;
  };
  std::string_view left, right;
  std::vector<int32_t> keys(2 * static_cast<size_t>(list.size()), -1);  // [n_merges][left, right]
  for (int32_t i = 0; i < list.size(); ++i) {
    if (!split(i, &left, &right)) continue;
    for (int side = 0; side < 2; ++side) {
      const std::string_view part = side == 0 ? left : right;
      int32_t key = vocab_.tokens.find(part);
      if (key < 0) {
        int32_t index = parts_.size();
        parts_.push_back(part, &index);  // a part seen before keeps its index
        key = vocab_.n_vocab() + index;
      }
      keys[2 * static_cast<size_t>(i) + side] = key;
    }
  }
  merges_.reserve(static_cast<size_t>(list.size()));
  std::string joined;
  for (int32_t i = 0; i < list.size(); ++i) {
    const int32_t kl = keys[2 * static_cast<size_t>(i)];
    const int32_t kr = keys[2 * static_cast<size_t>(i) + 1];
    if (kl < 0) continue;  // left out above
    split(i, &left, &right);
    joined.assign(left);
    joined.append(right);
    // The first rule listed wins when a file repeats one (insert keeps the first).
    merges_.insert(kl, kr, i, symbol_key(joined));
  }
  vocab_.merges.clear();
}

int32_t BpeTokenizer::symbol_key(std::string_view text) const {
  const int32_t id = vocab_.tokens.find(text);
  if (id >= 0) return id;
  const int32_t part = parts_.find(text);
  return part < 0 ? -1 : vocab_.n_vocab() + part;
}

int32_t BpeTokenizer::find(std::string_view text) const {
  const int32_t id = vocab_.tokens.find(text);
  return (id < 0 || !usable_[id]) ? -1 : id;
}

void BpeTokenizer::encode_word(const std::string& word, std::vector<int32_t>* out) const {
  if (pre_.ignore_merges) {
    const int32_t id = find(word);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  // One symbol per UTF-8 character of the byte-encoded word (always valid UTF-8).
  std::vector<Symbol> syms;
  for (size_t off = 0; off < word.size();) {
    const std::string_view ch = unicode_char_at(word, off);
    const auto i = static_cast<int32_t>(syms.size());
    syms.push_back(
        {static_cast<uint32_t>(off), static_cast<uint32_t>(ch.size()), i - 1, -1, symbol_key(ch)});
    if (i > 0) syms[i - 1].next = i;
    off += ch.size();
  }

  std::priority_queue<Pair> queue;
  auto try_pair = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const MergeTable::Rule rule = merges_.find(syms[l].key, syms[r].key);
    if (rule.rank >= 0) queue.push({rule.rank, l, r, syms[l].len, syms[r].len, rule.result});
  };
  for (size_t i = 1; i < syms.size(); ++i) {
    try_pair(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
  }
  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Symbol& l = syms[p.left];
    Symbol& r = syms[p.right];
    if (l.len != p.left_len || r.len != p.right_len || l.next != p.right) continue;  // stale
    l.len += r.len;
    l.key = p.result;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = p.left;
    try_pair(l.prev, p.left);
    try_pair(p.left, l.next);
  }

  const int32_t n_vocab = vocab_.n_vocab();
  for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
    // A key below n_vocab is the token id of the symbol's text, any other key no token.
    const int32_t key = syms[i].key;
    if (key >= 0 && key < n_vocab && usable_[key]) {
      out->push_back(key);
      continue;
    }
    const std::string_view text = std::string_view(word).substr(syms[i].start, syms[i].len);
    // A merge result missing from the vocabulary (inconsistent file): fall back to its single
    // characters; a character the vocabulary lacks is dropped, as llama.cpp does.
    for (size_t off = 0; off < text.size();) {
      const uint32_t len = unicode::utf8_decode(text.substr(off)).len;
      const int32_t cid = find(text.substr(off, len));
      if (cid >= 0) out->push_back(cid);
      off += len;
    }
  }
}

Status BpeTokenizer::encode_fragment(std::string_view text, bool /*starts_text*/,
                                     std::vector<int32_t>* out) const {
  std::string word;
  for (std::string_view piece : pre_tokenize(pre_.type, text)) {
    word.clear();
    for (char c : piece) unicode::utf8_append(unicode::byte_to_cpt(static_cast<uint8_t>(c)), &word);
    encode_word(word, out);
  }
  return Status::ok();
}

std::string BpeTokenizer::piece_bytes(int32_t id) const {
  const std::string_view text = vocab_.tokens[id];
  std::string out;
  out.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const unicode::Utf8Char ch = unicode::utf8_decode(text.substr(off));
    uint8_t b = 0;
    if (ch.valid && unicode::cpt_to_byte(ch.cp, &b)) {
      out.push_back(static_cast<char>(b));
    } else {
      out.append(text.substr(off, ch.len));
    }
    off += ch.len;
  }
  return out;
}

Status make_bpe_tokenizer(Vocab vocab, const Logger& log, std::unique_ptr<Tokenizer>* out) {
  if (!out) return Status(GEIST_E_INVALID_ARG, "make_bpe_tokenizer: null output");
  for (int32_t i = 0; i < vocab.merges.size(); ++i) {
    const std::string_view m = vocab.merges[i];
    const size_t sp = m.find(' ');
    if (sp == std::string_view::npos || sp == 0 || sp + 1 == m.size()) {
      return Status::error(GEIST_E_FORMAT, "tokenizer.ggml.merges[%d] = '%.*s' is not 'left right'",
                           i, static_cast<int>(m.size()), m.data());
    }
  }
  // Symbol keys number the tokens, then the merge halves that are not tokens.
  if (static_cast<int64_t>(vocab.n_vocab()) + 2 * static_cast<int64_t>(vocab.merges.size()) >
      INT32_MAX) {
    return Status::error(GEIST_E_FORMAT, "%d tokens and %d merges are too many", vocab.n_vocab(),
                         vocab.merges.size());
  }
  PreTokenizerInfo pre;
  GEIST_RETURN_IF_ERROR(pre_tokenizer_from_name(vocab.pre, &pre));
  if (vocab.pre.empty()) {
    log.log(GEIST_LOG_WARN,
            "tokenizer.ggml.pre is missing: using the default pre-tokenizer, as llama.cpp does "
            "(generation quality may degrade; consider regenerating the GGUF)");
  }
  *out = std::make_unique<BpeTokenizer>(std::move(vocab), log, pre);
  return Status::ok();
}

}  // namespace geist
