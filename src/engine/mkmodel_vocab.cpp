// Synthetic byte-level BPE vocabulary for mkmodel (see mkmodel.h).
#include <string>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "engine/mkmodel.h"

namespace geist {
namespace {

// llama.cpp's token type numbering.
constexpr int32_t kTokenNormal = 1;
constexpr int32_t kTokenControl = 3;
constexpr int32_t kTokenUserDefined = 4;
constexpr int32_t kTokenUnused = 5;

// Qwen's added tokens in id order from <|endoftext|> (Qwen2.5/Qwen3 tokenizer_config.json; Qwen3.5
// places them from id 248044 on in the same order, e.g. <|vision_start|> = 248053). The special
// ones are control tokens, the rest (tool/fim/think markers) user-defined, as the converter
// types them.
struct AddedToken {
  const char* text;
  bool control;
};
constexpr AddedToken kQwenAdded[] = {
    {"<|endoftext|>", true},      {"<|im_start|>", true},
    {"<|im_end|>", true},         {"<|object_ref_start|>", true},
    {"<|object_ref_end|>", true}, {"<|box_start|>", true},
    {"<|box_end|>", true},        {"<|quad_start|>", true},
    {"<|quad_end|>", true},       {"<|vision_start|>", true},
    {"<|vision_end|>", true},     {"<|vision_pad|>", true},
    {"<|image_pad|>", true},      {"<|video_pad|>", true},
    {"<tool_call>", false},       {"</tool_call>", false},
    {"<|fim_prefix|>", false},    {"<|fim_middle|>", false},
    {"<|fim_suffix|>", false},    {"<|fim_pad|>", false},
    {"<|repo_name|>", false},     {"<|file_sep|>", false},
    {"<tool_response>", false},   {"</tool_response>", false},
    {"<think>", false},           {"</think>", false},
};
constexpr int32_t kQwenAddedCount =
    static_cast<int32_t>(sizeof(kQwenAdded) / sizeof(kQwenAdded[0]));

void append_utf8(std::string* s, uint32_t cp) {
  if (cp < 0x80) {
    s->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// GPT-2's reversible byte->unicode map: printable Latin-1 bytes stand for themselves, the
// other 68 bytes take code points 256.. in byte order. Token i of the vocabulary is byte
// byte_order[i], in the order GPT-2 style vocabularies list them.
void byte_alphabet(std::vector<uint8_t>* byte_order, std::vector<uint32_t>* code_point) {
  std::vector<bool> printable(256, false);
  for (int b = 0; b < 256; ++b) {
    printable[b] = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  }
  code_point->assign(256, 0);
  byte_order->clear();
  for (int b = 0; b < 256; ++b) {
    if (printable[b]) {
      byte_order->push_back(static_cast<uint8_t>(b));
      (*code_point)[b] = static_cast<uint32_t>(b);
    }
  }
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    if (!printable[b]) {
      byte_order->push_back(static_cast<uint8_t>(b));
      (*code_point)[b] = next++;
    }
  }
}

// The vocabulary must not depend on the weight seed: a fixed generator.
struct VocabRng {
  uint64_t s = 0x6765697374766f63ull;  // "geistvoc"
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Index in [0, n), biased towards the front (short, early tokens) like real merge tables,
  // where most merges extend common pieces.
  size_t biased(size_t n) {
    const double u = static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0);
    const size_t i = static_cast<size_t>(u * u * u * static_cast<double>(n));
    return i < n ? i : n - 1;
  }
};

std::vector<std::string> special_names(int32_t n_special) {
  // Llama 3's first control tokens, then reserved ones numbered as Llama 3 numbers them.
  std::vector<std::string> names = {"<|begin_of_text|>",
                                    "<|end_of_text|>",
                                    "<|reserved_special_token_0|>",
                                    "<|reserved_special_token_1|>",
                                    "<|finetune_right_pad_id|>",
                                    "<|reserved_special_token_2|>",
                                    "<|start_header_id|>",
                                    "<|end_header_id|>",
                                    "<|eom_id|>",
                                    "<|eot_id|>",
                                    "<|python_tag|>"};
  if (static_cast<int32_t>(names.size()) > n_special) names.resize(n_special);
  for (int32_t r = 3; static_cast<int32_t>(names.size()) < n_special; ++r) {
    names.push_back("<|reserved_special_token_" + std::to_string(r) + "|>");
  }
  return names;
}

}  // namespace

MkVocab mkmodel_build_vocab(const MkModelPreset& p) {
  const bool qwen = p.arch == MkArch::QWEN35;
  GEIST_CHECK(p.n_special >= (qwen ? kQwenAddedCount : 11) && p.n_vocab - p.n_special >= 256 + 64,
              "mkmodel preset vocabulary too small");
  MkVocab v;
  const size_t n_regular = static_cast<size_t>(p.n_vocab - p.n_special);
  v.tokens.reserve(p.n_vocab);
  v.merges.reserve(n_regular - 256);

  std::vector<uint8_t> byte_order;
  std::vector<uint32_t> code_point;
  byte_alphabet(&byte_order, &code_point);
  std::unordered_set<std::string> seen;
  seen.reserve(p.n_vocab * 2);
  for (uint8_t b : byte_order) {
    std::string t;
    append_utf8(&t, code_point[b]);
    seen.insert(t);
    v.tokens.push_back(std::move(t));
  }

  // Merged tokens look like what the llama-bpe pre-tokenizer produces: an optional leading
  // space ('Ġ', the byte-level form of ' ') followed by letters. `left` holds pieces that
  // may start a word, `right` pieces that may continue one (no space). Letters are listed
  // by English frequency so that the bias towards the front builds plausible pieces first.
  std::string space;
  append_utf8(&space, code_point[' ']);
  const std::string letters = "etaoinshrdlcumwfgypbvkjxqzETAOINSHRDLCUMWFGYPBVKJXQZ";
  std::vector<std::string> left = {space};
  std::vector<std::string> right;
  for (char c : letters) {
    left.emplace_back(1, c);
    right.emplace_back(1, c);
  }
  VocabRng rng;
  while (v.tokens.size() < n_regular) {
    const std::string& a = left[rng.biased(left.size())];
    const std::string& b = right[rng.biased(right.size())];
    std::string joined = a + b;
    if (!seen.insert(joined).second) continue;  // already a token: draw another pair
    v.merges.push_back(a + " " + b);
    const bool starts_with_space = joined.compare(0, space.size(), space) == 0;
    v.tokens.push_back(joined);
    if (!starts_with_space) right.push_back(joined);
    left.push_back(std::move(joined));
  }
  v.types.assign(v.tokens.size(), kTokenNormal);

  const int32_t first_special = static_cast<int32_t>(v.tokens.size());
  if (qwen) {
    for (const AddedToken& t : kQwenAdded) {
      v.tokens.emplace_back(t.text);
      v.types.push_back(t.control ? kTokenControl : kTokenUserDefined);
    }
    // The converter fills ids the tokenizer does not define up to vocab_size like this.
    while (static_cast<int32_t>(v.tokens.size()) < p.n_vocab) {
      v.tokens.push_back("[PAD" + std::to_string(v.tokens.size()) + "]");
      v.types.push_back(kTokenUnused);
    }
    v.bos = first_special + 0;  // <|endoftext|>
    v.pad = first_special + 0;
    v.eos = first_special + 2;  // <|im_end|>
    v.eot = first_special + 2;
    return v;
  }
  const std::vector<std::string> specials = special_names(p.n_special);
  for (const std::string& s : specials) {
    v.tokens.push_back(s);
    v.types.push_back(kTokenControl);
  }
  v.bos = first_special + 0;  // <|begin_of_text|>
  v.eos = first_special + 1;  // <|end_of_text|>
  v.eot = first_special + 9;  // <|eot_id|>
  return v;
}

}  // namespace geist
