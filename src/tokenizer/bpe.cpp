#include "tokenizer/bpe.h"

#include <queue>

#include "tokenizer/unicode.h"

namespace geist {
namespace {

// A symbol of the word being merged; symbols only grow to the right, so (start, len) never
// repeats for different content and a queued pair can be checked for staleness by lengths.
struct Symbol {
  uint32_t start;  // byte offset in the word
  uint32_t len;    // bytes; 0 once merged into its left neighbour
  int32_t prev, next;
};

struct Pair {
  int32_t rank;
  int32_t left, right;
  uint32_t left_len, right_len;  // lengths when queued
  // Lowest rank first, then leftmost.
  bool operator<(const Pair& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
};

}  // namespace

BpeTokenizer::BpeTokenizer(Vocab vocab, const Logger& log, PreTokenizerInfo pre)
    : TokenizerBase(std::move(vocab), log), pre_(pre) {
  merge_rank_.reserve(vocab_.merges.size());
  for (size_t i = 0; i < vocab_.merges.size(); ++i) {
    // The first merge listed wins when a file repeats one.
    merge_rank_.emplace(vocab_.merges[i], static_cast<int32_t>(i));
  }
  // A user-defined token whose text is not what its byte-level reading stands for (DeepSeek's
  // added "ÿ" etc., which decode to their UTF-8 text) would not give back the bytes it was
  // chosen for, so BPE never picks it; the special-token split still finds its literal text.
  usable_.resize(vocab_.tokens.size(), true);
  for (int32_t id = 0; id < vocab_.n_vocab(); ++id) {
    if (vocab_.types[id] == TokenAttr::USER_DEFINED)
      usable_[id] = piece_bytes(id) == vocab_.tokens[id];
  }
}

int32_t BpeTokenizer::find(std::string_view text) const {
  const auto it = vocab_.token_to_id.find(std::string(text));
  return (it == vocab_.token_to_id.end() || !usable_[it->second]) ? -1 : it->second;
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
    const uint32_t len = unicode::utf8_decode(std::string_view(word).substr(off)).len;
    const auto i = static_cast<int32_t>(syms.size());
    syms.push_back({static_cast<uint32_t>(off), len, i - 1, -1});
    if (i > 0) syms[i - 1].next = i;
    off += len;
  }

  std::priority_queue<Pair> queue;
  std::string key;
  auto try_pair = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    key.assign(word, syms[l].start, syms[l].len);
    key.push_back(' ');
    key.append(word, syms[r].start, syms[r].len);
    const auto it = merge_rank_.find(key);
    if (it != merge_rank_.end()) queue.push({it->second, l, r, syms[l].len, syms[r].len});
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
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = p.left;
    try_pair(l.prev, p.left);
    try_pair(p.left, l.next);
  }

  for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
    const std::string_view text = std::string_view(word).substr(syms[i].start, syms[i].len);
    const int32_t id = find(text);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
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
  for (size_t i = 0; i < vocab.merges.size(); ++i) {
    const std::string& m = vocab.merges[i];
    const size_t sp = m.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == m.size()) {
      return Status::error(GEIST_E_FORMAT, "tokenizer.ggml.merges[%zu] = '%s' is not 'left right'",
                           i, m.c_str());
    }
  }
  const PreTokenizerInfo pre = pre_tokenizer_from_name(vocab.pre);
  if (!pre.known) {
    log.log(GEIST_LOG_WARN,
            "tokenizer.ggml.pre '%s' is not a known pre-tokenizer; using the default splits, "
            "so tokenization may differ from the model's own",
            vocab.pre.c_str());
  }
  *out = std::make_unique<BpeTokenizer>(std::move(vocab), log, pre);
  return Status::ok();
}

}  // namespace geist
