// Tokenizers built from GGUF metadata (tokenizer.ggml.*): SentencePiece-style ("llama") and
// byte-level BPE ("gpt2") with the pre-tokenizer named by tokenizer.ggml.pre.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.h"
#include "base/status.h"
#include "formats/gguf.h"

namespace geist {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Builds the tokenizer the metadata describes. GEIST_E_FORMAT for missing/inconsistent
  // metadata, GEIST_E_UNSUPPORTED for an unknown tokenizer model. An unknown pre-tokenizer
  // name falls back to the default regex with a warning on `log` (documented in docs/API.md).
  static Status load(const GgufFile& file, const Logger& log, std::unique_ptr<Tokenizer>* out);

  // add_special: BOS/EOS as tokenizer.ggml.add_bos_token / add_eos_token say.
  // parse_special: text matching a control/user-defined token's text becomes that token.
  virtual Status encode(std::string_view text, bool add_special, bool parse_special,
                        std::vector<int32_t>* out) const = 0;
  // Concatenated pieces; the SentencePiece leading space added by encode is removed when the
  // first token starts the text. GEIST_E_INVALID_ARG for ids out of range.
  virtual Status decode(const int32_t* ids, size_t n, std::string* out) const = 0;
  // The bytes one token contributes to the output stream (control tokens: empty).
  virtual Status token_to_piece(int32_t id, std::string* out) const = 0;

  virtual int32_t n_vocab() const = 0;
  virtual int32_t bos() const = 0;  // -1 if none
  virtual int32_t eos() const = 0;  // -1 if none
  virtual bool is_eog(int32_t id) const = 0;
  // Every id that ends generation (is_eog is true exactly for these), ascending: eos, eot,
  // eom, the FIM pad/repo/file-separator tokens and the turn terminators llama.cpp
  // recognises by their text (<|im_end|>, <|eot_id|>, <end_of_turn>, ...).
  virtual const std::vector<int32_t>& eog_tokens() const = 0;
  virtual std::string_view model_name() const = 0;  // "llama", "gpt2", ...
  virtual std::string_view pre_name() const = 0;    // tokenizer.ggml.pre or ""
};

}  // namespace geist
