#include "tokenizer/vocab.h"

#include <algorithm>
#include <string_view>

namespace geist {
namespace {

constexpr std::string_view kPrefix = "tokenizer.ggml.";
// Text of all tokens (or all merges) together; well below the 32-bit offsets of the tables,
// and far above any real vocabulary (~2 MiB for 250k tokens).
constexpr size_t kMaxTextBytes = size_t{1} << 31;
constexpr size_t kMaxRenamedBytes = 24;  // "[EMPTY_<index>]" for an int32 index, rounded up

std::string key_of(std::string_view name) { return std::string(kPrefix) + std::string(name); }

// An optional boolean key: absent leaves *out unchanged, a wrong type is a format error.
Status read_opt_bool(const GgufFile& file, std::string_view name, bool* out) {
  const std::string key = key_of(name);
  if (!file.find(key)) return Status::ok();
  return file.get_bool(key, out);
}

bool is_integer_type(GgufValueType t) {
  switch (t) {
    case GgufValueType::UINT8:
    case GgufValueType::INT8:
    case GgufValueType::UINT16:
    case GgufValueType::INT16:
    case GgufValueType::UINT32:
    case GgufValueType::INT32:
    case GgufValueType::UINT64:
    case GgufValueType::INT64:
      return true;
    default:
      return false;
  }
}

bool is_signed_type(GgufValueType t) {
  return t == GgufValueType::INT8 || t == GgufValueType::INT16 || t == GgufValueType::INT32 ||
         t == GgufValueType::INT64;
}

// A special-token id key. Converters write "none" as -1, which as uint32 is 0xFFFFFFFF (as
// stories260K.gguf has it); both mean "no such token". Any other id outside the vocabulary
// is a format error rather than llama.cpp's silent fallback to a default, so that a broken
// file is noticed at load.
Status read_special_id(const GgufFile& file, std::string_view name, int32_t n_vocab, int32_t* id) {
  const std::string key = key_of(name);
  const GgufKv* kv = file.find(key);
  if (!kv) return Status::ok();
  if (!is_integer_type(kv->type)) {
    return Status::error(GEIST_E_FORMAT, "%s: expected an integer, got %s", key.c_str(),
                         gguf_value_type_name(kv->type));
  }
  int64_t v = 0;
  if (is_signed_type(kv->type)) {
    v = kv->i64;
  } else {
    if (kv->u64 == 0xFFFFFFFFull || kv->u64 == ~0ull) {
      *id = -1;
      return Status::ok();
    }
    if (kv->u64 >= static_cast<uint64_t>(n_vocab)) {
      return Status::error(GEIST_E_FORMAT, "%s = %llu is outside the vocabulary [0, %d)",
                           key.c_str(), static_cast<unsigned long long>(kv->u64), n_vocab);
    }
    v = static_cast<int64_t>(kv->u64);
  }
  if (v == -1) {
    *id = -1;
    return Status::ok();
  }
  if (v < 0 || v >= n_vocab) {
    return Status::error(GEIST_E_FORMAT, "%s = %lld is outside the vocabulary [0, %d)", key.c_str(),
                         static_cast<long long>(v), n_vocab);
  }
  *id = static_cast<int32_t>(v);
  return Status::ok();
}

bool in_list(std::string_view s, std::initializer_list<std::string_view> list) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// Defaults that depend on the tokenizer model (and, for BPE, on the pre-tokenizer), applied
// before the file's own keys override them. They follow llama.cpp so that a GGUF without the
// optional keys tokenizes as it does there.
void apply_model_defaults(Vocab* v) {
  if (v->model == "llama") {
    v->bos = 1;
    v->eos = 2;
    v->unk = 0;
    v->add_bos = true;
    v->add_space_prefix = true;
  } else if (v->model == "bert") {
    v->bos = 101;  // [CLS]
    v->unk = 100;
    v->sep = 102;
    v->pad = 0;
    v->mask = 103;
    v->add_bos = true;
    v->add_sep = true;
    v->clean_spaces = true;
  } else if (v->model == "gpt2") {
    v->bos = 11;
    v->eos = 11;
    v->clean_spaces = true;
    const std::string_view pre = v->pre;
    if (in_list(pre, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
                      "midm-2.0", "lfm2", "tekken", "chameleon"})) {
      v->add_bos = true;
    }
    if (in_list(pre,
                {"deepseek-llm",     "deepseek-coder", "deepseek-v3", "command-r",  "qwen2",
                 "deepseek-r1-qwen", "qwen35",         "poro-chat",   "viking",     "tekken",
                 "smollm",           "chameleon",      "gpt-4o",      "llama4",     "seed-coder",
                 "hunyuan",          "kimi-k2",        "trillion",    "bailingmoe", "grok-2"})) {
      v->clean_spaces = false;
    }
    if (in_list(pre, {"roberta-bpe", "jina-v1-en", "jina-v2-code"})) v->add_sep = true;
  }
}

}  // namespace

Status Vocab::load(const GgufFile& file, Vocab* out) {
  Vocab v;
  std::string_view sv;
  Status st = file.get_str(key_of("model"), &sv);
  if (!st) return Status(GEIST_E_FORMAT, "tokenizer metadata: " + st.message());
  v.model = std::string(sv);
  if (file.find(key_of("pre"))) {
    GEIST_RETURN_IF_ERROR(file.get_str(key_of("pre"), &sv));
    v.pre = std::string(sv);
  }

  const std::vector<std::string_view>* toks = nullptr;
  st = file.get_arr_str(key_of("tokens"), &toks);
  if (!st) return Status(GEIST_E_FORMAT, "tokenizer metadata: " + st.message());
  if (toks->empty()) return Status(GEIST_E_FORMAT, "tokenizer.ggml.tokens is empty");
  if (toks->size() > static_cast<size_t>(INT32_MAX)) {
    return Status(GEIST_E_FORMAT, "tokenizer.ggml.tokens has too many entries");
  }
  const size_t n = toks->size();
  const int32_t n_vocab = static_cast<int32_t>(n);

  // The flat tables address text with 32-bit offsets; the bound leaves room for the names
  // that replace empty texts.
  size_t bytes = 0;
  for (std::string_view t : *toks) bytes += t.empty() ? kMaxRenamedBytes : t.size();
  if (bytes > kMaxTextBytes) {
    return Status::error(GEIST_E_FORMAT, "tokenizer.ggml.tokens holds %zu bytes of text (max %zu)",
                         bytes, kMaxTextBytes);
  }
  v.tokens.reserve(n, bytes);
  std::string renamed;
  for (size_t i = 0; i < n; ++i) {
    // An empty text could never be matched or printed; llama.cpp renames it the same way.
    std::string_view text = (*toks)[i];
    if (text.empty()) {
      renamed = "[EMPTY_" + std::to_string(i) + "]";
      text = renamed;
    }
    if (!v.tokens.push_back(text)) {
      return Status::error(GEIST_E_FORMAT, "tokenizer.ggml.tokens: token %zu duplicates '%.*s'", i,
                           static_cast<int>(text.size()), text.data());
    }
  }

  if (file.find(key_of("scores"))) {
    GEIST_RETURN_IF_ERROR(file.get_arr_f32(key_of("scores"), &v.scores));
    if (v.scores.size() != n) {
      return Status::error(GEIST_E_FORMAT, "tokenizer.ggml.scores has %zu entries, tokens %zu",
                           v.scores.size(), n);
    }
  } else {
    v.scores.assign(n, 0.0f);
  }

  v.types.assign(n, TokenAttr::NORMAL);
  if (file.find(key_of("token_type"))) {
    std::vector<int32_t> types;
    GEIST_RETURN_IF_ERROR(file.get_arr_i32(key_of("token_type"), &types));
    if (types.size() != n) {
      return Status::error(GEIST_E_FORMAT, "tokenizer.ggml.token_type has %zu entries, tokens %zu",
                           types.size(), n);
    }
    for (size_t i = 0; i < n; ++i) {
      if (types[i] < 0 || types[i] > static_cast<int32_t>(TokenAttr::BYTE)) {
        return Status::error(GEIST_E_FORMAT, "tokenizer.ggml.token_type[%zu] = %d is not a type", i,
                             types[i]);
      }
      v.types[i] = static_cast<TokenAttr>(types[i]);
    }
  }

  if (file.find(key_of("merges"))) {
    const std::vector<std::string_view>* merges = nullptr;
    GEIST_RETURN_IF_ERROR(file.get_arr_str(key_of("merges"), &merges));
    bytes = 0;
    for (std::string_view m : *merges) bytes += m.size();
    if (bytes > kMaxTextBytes || merges->size() > static_cast<size_t>(INT32_MAX)) {
      return Status::error(GEIST_E_FORMAT,
                           "tokenizer.ggml.merges has %zu entries, %zu bytes of text (too many)",
                           merges->size(), bytes);
    }
    v.merges.reserve(merges->size(), bytes);
    for (std::string_view m : *merges) v.merges.push_back(m);
  } else if (v.model == "gpt2") {
    return Status(GEIST_E_FORMAT, "tokenizer.ggml.merges is required for a gpt2 tokenizer");
  }

  apply_model_defaults(&v);
  // Defaults may not fit a small vocabulary; an id the file did not give must not dangle.
  for (int32_t* id : {&v.bos, &v.eos, &v.unk, &v.sep, &v.pad, &v.mask}) {
    if (*id >= n_vocab) *id = -1;
  }

  GEIST_RETURN_IF_ERROR(read_special_id(file, "bos_token_id", n_vocab, &v.bos));
  GEIST_RETURN_IF_ERROR(read_special_id(file, "eos_token_id", n_vocab, &v.eos));
  GEIST_RETURN_IF_ERROR(read_special_id(file, "eot_token_id", n_vocab, &v.eot));
  GEIST_RETURN_IF_ERROR(read_special_id(file, "eom_token_id", n_vocab, &v.eom));
  GEIST_RETURN_IF_ERROR(read_special_id(file, "unknown_token_id", n_vocab, &v.unk));
  // "seperator" is how llama.cpp's key is spelled.
  GEIST_RETURN_IF_ERROR(read_special_id(file, "seperator_token_id", n_vocab, &v.sep));
  GEIST_RETURN_IF_ERROR(read_special_id(file, "padding_token_id", n_vocab, &v.pad));
  GEIST_RETURN_IF_ERROR(read_special_id(file, "mask_token_id", n_vocab, &v.mask));
  GEIST_RETURN_IF_ERROR(read_special_id(file, "fim_pad_token_id", n_vocab, &v.fim_pad));
  GEIST_RETURN_IF_ERROR(read_special_id(file, "fim_rep_token_id", n_vocab, &v.fim_rep));
  GEIST_RETURN_IF_ERROR(read_special_id(file, "fim_sep_token_id", n_vocab, &v.fim_sep));

  GEIST_RETURN_IF_ERROR(read_opt_bool(file, "add_bos_token", &v.add_bos));
  GEIST_RETURN_IF_ERROR(read_opt_bool(file, "add_eos_token", &v.add_eos));
  GEIST_RETURN_IF_ERROR(read_opt_bool(file, "add_sep_token", &v.add_sep));
  GEIST_RETURN_IF_ERROR(read_opt_bool(file, "add_space_prefix", &v.add_space_prefix));
  GEIST_RETURN_IF_ERROR(
      read_opt_bool(file, "remove_extra_whitespaces", &v.remove_extra_whitespaces));
  GEIST_RETURN_IF_ERROR(read_opt_bool(file, "normalizer.lowercase", &v.lowercase));
  v.strip_accents = v.lowercase;  // BERT's default: accents go with case unless said otherwise
  GEIST_RETURN_IF_ERROR(read_opt_bool(file, "normalizer.strip_accents", &v.strip_accents));

  if (v.add_bos && v.bos < 0) {
    return Status(GEIST_E_FORMAT, "tokenizer.ggml.add_bos_token is set but there is no BOS id");
  }
  if (v.add_eos && v.eos < 0) {
    return Status(GEIST_E_FORMAT, "tokenizer.ggml.add_eos_token is set but there is no EOS id");
  }
  if (v.add_sep && v.sep < 0) {
    return Status(GEIST_E_FORMAT, "tokenizer.ggml.add_sep_token is set but there is no SEP id");
  }

  find_eog_tokens(&v);

  *out = std::move(v);
  return Status::ok();
}

}  // namespace geist
