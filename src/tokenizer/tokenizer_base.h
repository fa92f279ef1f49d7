// Behaviour shared by every tokenizer model: special-token partitioning (parse_special),
// BOS/EOS, piece lookup, decode. A model implements encode_fragment and its piece mapping.
#pragma once

#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace geist {

class TokenizerBase : public Tokenizer {
 public:
  explicit TokenizerBase(Vocab vocab, const Logger& log);

  Status encode(std::string_view text, bool add_special, bool parse_special,
                std::vector<int32_t>* out) const override;
  Status decode(const int32_t* ids, size_t n, std::string* out) const override;
  Status token_to_piece(int32_t id, std::string* out) const override;

  int32_t n_vocab() const override { return vocab_.n_vocab(); }
  int32_t bos() const override { return vocab_.bos; }
  int32_t eos() const override { return vocab_.eos; }
  bool is_eog(int32_t id) const override;
  const std::vector<int32_t>& eog_tokens() const override { return vocab_.eog_ids; }
  std::string_view model_name() const override { return vocab_.model; }
  std::string_view pre_name() const override { return vocab_.pre; }
  const Vocab& vocab() const { return vocab_; }

 protected:
  // Tokenizes a run of plain text (no special tokens inside). `starts_text` is true when the
  // fragment is at the start of the input or directly after a special token, which matters for
  // SentencePiece's leading space. Appends ids to *out.
  virtual Status encode_fragment(std::string_view text, bool starts_text,
                                 std::vector<int32_t>* out) const = 0;
  // Output bytes of a NORMAL or BYTE token (SPM: '▁' -> ' ', <0xAB> -> byte; BPE: byte-level
  // unicode chars -> bytes). token_to_piece itself gives user-defined tokens their text as
  // stored and control/unknown/unused tokens nothing.
  virtual std::string piece_bytes(int32_t id) const = 0;
  // Whether encode puts a space in front of the text that decode must take off again
  // (SentencePiece's add_space_prefix; WordPiece's word-initial U+2581).
  virtual bool adds_leading_space() const { return vocab_.add_space_prefix; }

  Vocab vocab_;
  Logger log_;
  std::vector<int32_t> special_ids_;  // control/user-defined/unknown ids, longest text first
};

}  // namespace geist
