// Byte-level BPE (GPT-2 style, tokenizer.ggml.model = "gpt2"): pre-tokenize with the regex
// passes tokenizer.ggml.pre names, map each piece's bytes to GPT-2's printable code points,
// merge adjacent symbols by rank (position in tokenizer.ggml.merges; lowest rank first, the
// leftmost pair on ties), then look the symbols up in the vocabulary.
#pragma once

#include <string>
#include <unordered_map>

#include "tokenizer/pretokenize.h"
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

  PreTokenizerInfo pre_;
  std::unordered_map<std::string, int32_t> merge_rank_;  // "left right" -> rank
  std::vector<bool> usable_;  // [n_vocab] false: BPE must not emit this id (see constructor)
};

}  // namespace geist
