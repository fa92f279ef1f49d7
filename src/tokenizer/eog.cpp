// The end-of-generation token set. The lists and the two exceptions follow llama.cpp's
// llama_vocab::impl::load (src/llama-vocab.cpp), which recognises turn terminators by their
// text because converters rarely write eot/eom ids.
#include <algorithm>
#include <array>
#include <string_view>

#include "tokenizer/vocab.h"

namespace geist {
namespace {

// Texts taken as the EOT token when tokenizer.ggml.eot_token_id is absent, in order of
// preference (llama.cpp takes whichever its hash map yields first; a fixed order is stable).
constexpr std::array<std::string_view, 11> kEotTexts = {
    "<|eot_id|>",         "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>",    "<EOT>",      "_<EOT>",  "[EOT]",         "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
};
constexpr std::array<std::string_view, 5> kFimPadTexts = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>",
                                                          "<PAD>", "[PAD]"};
constexpr std::array<std::string_view, 5> kFimRepTexts = {"<|fim_repo|>", "<|repo_name|>",
                                                          "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::array<std::string_view, 1> kFimSepTexts = {"<|file_sep|>"};

// Every token with one of these texts ends generation.
constexpr std::array<std::string_view, 22> kEogTexts = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
};

template <size_t N>
void find_first(const Vocab& v, const std::array<std::string_view, N>& texts, int32_t* id) {
  if (*id >= 0) return;
  for (std::string_view text : texts) {
    const int32_t found = v.tokens.find(text);
    if (found >= 0) {
      *id = found;
      return;
    }
  }
}

bool has_text(const Vocab& v, const std::vector<int32_t>& ids, std::string_view text) {
  return std::any_of(ids.begin(), ids.end(), [&](int32_t id) { return v.tokens[id] == text; });
}

// Drops the token `text` from eog_ids (if there) and gives it type `attr`.
void drop_eog(Vocab* v, std::string_view text, TokenAttr attr) {
  const int32_t id = v->tokens.find(text);
  auto it = std::find(v->eog_ids.begin(), v->eog_ids.end(), id);
  if (id < 0 || it == v->eog_ids.end()) return;
  v->eog_ids.erase(it);
  v->types[id] = attr;
}

}  // namespace

void find_eog_tokens(Vocab* v) {
  const int32_t eot_from_file = v->eot, eom_from_file = v->eom;
  const int32_t pad_from_file = v->fim_pad, rep_from_file = v->fim_rep, sep_from_file = v->fim_sep;
  find_first(*v, kEotTexts, &v->eot);
  find_first(*v, std::array<std::string_view, 1>{"<|eom_id|>"}, &v->eom);
  find_first(*v, kFimPadTexts, &v->fim_pad);
  find_first(*v, kFimRepTexts, &v->fim_rep);
  find_first(*v, kFimSepTexts, &v->fim_sep);
  // A token found by its text is a control token whatever the file says.
  const std::array<std::pair<int32_t, int32_t>, 5> found = {{{eot_from_file, v->eot},
                                                             {eom_from_file, v->eom},
                                                             {pad_from_file, v->fim_pad},
                                                             {rep_from_file, v->fim_rep},
                                                             {sep_from_file, v->fim_sep}}};
  for (const auto& [before, after] : found) {
    if (before < 0 && after >= 0) v->types[after] = TokenAttr::CONTROL;
  }

  v->eog_ids.clear();
  for (int32_t id : {v->fim_pad, v->fim_rep, v->fim_sep}) {
    if (id >= 0) v->eog_ids.push_back(id);
  }
  for (std::string_view text : kEogTexts) {
    const int32_t id = v->tokens.find(text);
    if (id < 0) continue;
    v->eog_ids.push_back(id);
    v->types[id] = TokenAttr::CONTROL;
  }
  for (int32_t id : {v->eos, v->eot, v->eom}) {
    if (id >= 0) v->eog_ids.push_back(id);
  }
  std::sort(v->eog_ids.begin(), v->eog_ids.end());
  v->eog_ids.erase(std::unique(v->eog_ids.begin(), v->eog_ids.end()), v->eog_ids.end());

  // gpt-oss (o200k_harmony) and solar-open end a message with <|end|> but a reply with
  // <|return|> / <|call|> (<|calls|> / <|flush|>): there <|end|> must not stop generation.
  const std::vector<int32_t>& eog = v->eog_ids;
  const bool has_call = has_text(*v, eog, "<|call|>") || has_text(*v, eog, "<|calls|>");
  if (has_text(*v, eog, "<|end|>") && ((has_text(*v, eog, "<|return|>") && has_call) ||
                                       (has_call && has_text(*v, eog, "<|flush|>")))) {
    drop_eog(v, "<|end|>", TokenAttr::USER_DEFINED);
  }
  // Gemma 4 and PaddleOCR write </s> inside replies.
  if (has_text(*v, eog, "<|tool_response>")) drop_eog(v, "</s>", TokenAttr::NORMAL);
}

}  // namespace geist
