// Byte-level BPE (GPT-2 style, tokenizer.ggml.model = "gpt2"): pre-tokenize with the regex
// passes tokenizer.ggml.pre names, map each piece's bytes to GPT-2's printable code points,
// merge adjacent symbols by rank (position in tokenizer.ggml.merges; lowest rank first, the
// leftmost pair on ties), then look the symbols up in the vocabulary.
#pragma once

#include <string>

#include "tokenizer/pretokenize.h"
#include "tokenizer/token_table.h"
#include "tokenizer/tokenizer_base.h"

namespace geist {

class BpeTokenizer : public TokenizerBase {
 public:
  // Use make_bpe_tokenizer, which validates the vocabulary first.
  BpeTokenizer(Vocab vocab, const Logger& log, PreTokenizerInfo pre);

  PreTokenizer pre_tokenizer() const { return pre_.type; }

 protected:
  Status encode_fragment(std::string_view text, bool starts_text,
                         std::vector<int32_t>* out) const override;
  // Each code point of the token text back to its byte. Code points outside GPT-2's byte
  // alphabet (hand-added tokens) are copied as UTF-8, so the text is never lost.
  std::string piece_bytes(int32_t id) const override;

 private:
  // Appends the ids of one pre-token (already byte-encoded to GPT-2 code points).
  void encode_word(const std::string& word, std::vector<int32_t>* out) const;
  // Id of a vocabulary entry BPE may emit for this byte-level text, -1 if none.
  int32_t find(std::string_view text) const;
  // Key of a symbol's text for merging: its token id, n_vocab + its index in parts_, or -1
  // when no merge rule names it.
  int32_t symbol_key(std::string_view text) const;
  // Builds merges_ and parts_ from vocab_.merges, then empties vocab_.merges.
  void build_merges();

  PreTokenizerInfo pre_;
  // Rules by (left key, right key). Equivalent to looking "left right" up by text: symbol
  // texts never contain an ASCII space (bytes are byte-level encoded), and a key stands for
  // exactly one text.
  MergeTable merges_;
  // Merge parts that are not tokens (only in inconsistent files), so that such rules still
  // apply exactly as their text says.
  TokenTable parts_;
  std::vector<bool> usable_;  // [n_vocab] false: BPE must not emit this id (see constructor)
};

}  // namespace geist
