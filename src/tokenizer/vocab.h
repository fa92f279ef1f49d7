// The vocabulary as tokenizer.ggml.* metadata describes it, shared by every tokenizer model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.h"
#include "base/status.h"
#include "formats/gguf.h"
#include "tokenizer/token_table.h"

namespace geist {

class Tokenizer;

// tokenizer.ggml.token_type values (llama.cpp's numbering).
enum class TokenAttr : uint8_t {
  UNDEFINED = 0,
  NORMAL = 1,
  UNKNOWN = 2,
  CONTROL = 3,
  USER_DEFINED = 4,
  UNUSED = 5,
  BYTE = 6,
};

struct Vocab {
  std::string model;  // tokenizer.ggml.model: "llama", "gpt2", "bert", ...
  std::string pre;    // tokenizer.ggml.pre ("" if absent)
  // [n_vocab] token text as stored (SPM: '▁' for space; BPE: byte-level chars), unique;
  // tokens.find(text) is the id of a text.
  TokenTable tokens;
  std::vector<float> scores;     // [n_vocab] (0 when absent)
  std::vector<TokenAttr> types;  // [n_vocab] (NORMAL when absent)
  // BPE merges "a b", in priority order. The BPE tokenizer turns them into its own table and
  // then empties this list, so that the texts are not kept twice.
  StringList merges;
  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, sep = -1, pad = -1, mask = -1;
  // Fill-in-the-middle padding, repository-name and file-separator tokens (code models); they
  // end generation too.
  int32_t fim_pad = -1, fim_rep = -1, fim_sep = -1;
  bool add_bos = false, add_eos = false, add_space_prefix = false;
  bool add_sep = false;  // tokenizer.ggml.add_sep_token: SEP after the text (BERT)
  bool remove_extra_whitespaces = false;
  bool clean_spaces = false;  // decode drops spaces before ?!., and in " 's" etc. (llama.cpp)
  bool lowercase = true;      // tokenizer.ggml.normalizer.lowercase (WPM)
  bool strip_accents = true;  // tokenizer.ggml.normalizer.strip_accents (WPM)
  // Ids that end generation (eos, eot, eom, fim pad/rep/sep and turn terminators found by
  // their text), ascending and unique; see find_eog_tokens.
  std::vector<int32_t> eog_ids;

  int32_t n_vocab() const { return tokens.size(); }
  // Reads and validates tokenizer.ggml.* (lengths consistent, ids in range).
  static Status load(const GgufFile& file, Vocab* out);
};

// Completes the end-of-generation set as llama.cpp (src/llama-vocab.cpp) builds it: eot, eom
// and fim pad/rep/sep ids the metadata left out are found by their token text; then eog_ids
// becomes those ids, eos, and every token whose text is a known end marker. Tokens so found
// become CONTROL (never printed, parsed only when asked), as llama.cpp overrides their type.
// Called by Vocab::load after the metadata ids are read.
void find_eog_tokens(Vocab* v);

// Factories for the tokenizer models; each lives in its own file.
Status make_spm_tokenizer(Vocab vocab, const Logger& log, std::unique_ptr<Tokenizer>* out);
Status make_bpe_tokenizer(Vocab vocab, const Logger& log, std::unique_ptr<Tokenizer>* out);
Status make_wpm_tokenizer(Vocab vocab, const Logger& log, std::unique_ptr<Tokenizer>* out);

}  // namespace geist
