#include "tokenizer/tokenizer.h"

#include "tokenizer/vocab.h"

namespace geist {

Status Tokenizer::load(const GgufFile& file, const Logger& log, std::unique_ptr<Tokenizer>* out) {
  if (!out) return Status(GEIST_E_INVALID_ARG, "Tokenizer::load: null output");
  Vocab vocab;
  GEIST_RETURN_IF_ERROR(Vocab::load(file, &vocab));
  if (vocab.model == "llama") return make_spm_tokenizer(std::move(vocab), log, out);
  if (vocab.model == "gpt2") return make_bpe_tokenizer(std::move(vocab), log, out);
  if (vocab.model == "bert") return make_wpm_tokenizer(std::move(vocab), log, out);
  return Status::error(GEIST_E_UNSUPPORTED, "tokenizer model '%s' is not supported",
                       vocab.model.c_str());
}

}  // namespace geist
