// Pre-tokenizers of byte-level BPE vocabularies: the regex word splits that
// tokenizer.ggml.pre names (as llama.cpp maps the names in src/llama-vocab.cpp), written as
// hand-made matchers over Unicode categories instead of a regex engine.
//
// A pre-tokenizer is a list of passes. Each pass is one regex applied, leftmost-first like a
// backtracking regex engine, to every piece the previous passes produced; both the matches and
// the text between them become pieces. Pieces never cross the boundaries of earlier passes.
//
// Invalid UTF-8: each invalid byte is one code point of category So (it classifies like
// U+FFFD) and stays the original byte in the piece, so pieces always concatenate back to the
// exact input (llama.cpp instead replaces the byte by U+FFFD, i.e. the bytes EF BF BD).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace geist {

enum class PreTokenizer {
  DEFAULT,         // llama.cpp's default: punctuation runs, gpt2, \p{N}+, [0-9]{3}
  GPT2,            // the GPT-2 regex alone (gpt-2, mpt, olmo, phi-2, ...)
  LLAMA3,          // Llama 3 regex, \p{N}{1,3} (llama-bpe, dbrx, smaug-bpe, glm4, ...)
  QWEN2,           // Llama 3 shape with single digits (qwen2, deepseek-r1-qwen, stablelm2, ...)
  QWEN35,          // QWEN2 with combining marks kept in words and out of punctuation runs
  SEED_CODER,      // QWEN2 whose punctuation runs do not take trailing newlines
  STARCODER,       // single digits, then gpt2 (starcoder, refact, command-r, smollm, ...)
  FALCON,          // punctuation runs with backtick, gpt2, [0-9]{3}
  DEEPSEEK_LLM,    // DeepSeek LLM's six passes (cased letters, ASCII/CJK punctuation, ...)
  DEEPSEEK_CODER,  // DeepSeek Coder's five passes
  PORO,            // " ?[^(\s|.,!?…。，、।۔،)]+" (poro-chat, bloom, gpt3-finnish)
  VIKING,          // PORO, then single digits
  TEKKEN,          // cased words, single digits, "/" after punctuation (Mistral Nemo, Small 3)
  GPT4O,           // TEKKEN with contractions and \p{N}{1,3} (gpt-4o, llama4, kanana2)
};

struct PreTokenizerInfo {
  PreTokenizer type = PreTokenizer::DEFAULT;
  bool ignore_merges = false;  // a piece that is a whole token skips BPE (Llama 3 style)
};

// Maps a tokenizer.ggml.pre value as llama.cpp does: "" (key absent; the caller warns) and
// "default" give DEFAULT. A name llama.cpp does not know is GEIST_E_UNSUPPORTED naming it (as
// llama.cpp refuses it), and so is a name llama.cpp knows whose splits geist lacks: the file
// would otherwise tokenize differently from the model's own tokenizer.
Status pre_tokenizer_from_name(std::string_view name, PreTokenizerInfo* out);

// Splits `text` into pre-tokens, views into `text` in order, covering it exactly.
std::vector<std::string_view> pre_tokenize(PreTokenizer type, std::string_view text);

}  // namespace geist
