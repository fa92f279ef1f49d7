// The tensor names of the architectures geist runs (one table, spelled as llama.cpp's
// src/llama-arch.cpp spells them, so that any GGUF in the wild loads) and the checks every
// loader applies to a tensor before it views or copies it: shape, type, size, alignment.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "base/status.h"
#include "formats/gguf.h"

namespace geist {

enum class Tn {
  TOKEN_EMBD,
  OUTPUT_NORM,
  OUTPUT,
  ROPE_FREQS,
  ATTN_NORM,
  ATTN_Q,
  ATTN_K,
  ATTN_V,
  ATTN_OUTPUT,
  ATTN_Q_NORM,
  ATTN_K_NORM,
  ATTN_QKV,
  ATTN_GATE,
  ATTN_POST_NORM,  // "post_attention_norm"
  FFN_NORM,
  FFN_GATE,
  FFN_UP,
  FFN_DOWN,
  SSM_A,
  SSM_CONV1D,
  SSM_DT,
  SSM_ALPHA,
  SSM_BETA,
  SSM_NORM,
  SSM_OUT,
};

// "blk.<layer>.<base>.<suffix>" for per-layer tensors (layer >= 0), "<base>.<suffix>"
// otherwise; no ".<suffix>" when suffix is empty (ssm_a). tn(Tn::ATTN_Q, "weight", 3) is
// "blk.3.attn_q.weight".
std::string tn(Tn t, const char* suffix, int32_t layer = -1);

// Checked access to a file's tensors for one architecture's loader; messages start with the
// architecture name and name the tensor.
class TensorChecks {
 public:
  TensorChecks(const GgufFile& file, const char* arch) : file_(file), arch_(arch) {}
  const GgufFile& file() const { return file_; }
  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }

  // The tensor, checked to be [ne0] (ne1 == 0) or [ne0, ne1] in ggml order, of a type geist
  // computes with, holding whole blocks per row. GEIST_E_FORMAT (missing, shape, size),
  // GEIST_E_UNSUPPORTED (type).
  Status find(const std::string& name, int64_t ne0, int64_t ne1, const GgufTensorInfo** out) const;
  // A matrix mapping n_in -> n_out (GGUF ne = {n_in, n_out}), viewed in place.
  Status matrix(const std::string& name, int64_t n_in, int64_t n_out, WeightMatrix* out) const;
  // An f32 vector of n elements, viewed in place (GEIST_E_UNSUPPORTED for other types).
  Status f32_view(const std::string& name, int64_t n, const float** out) const;
  // ne0 x ne1 elements (ne1 == 0: one row) of any supported type, dequantized into an owned
  // f32 copy; a non-finite value is GEIST_E_FORMAT.
  Status f32_copy(const std::string& name, int64_t ne0, int64_t ne1, std::vector<float>* out) const;

 private:
  Status error(geist_status code, const std::string& msg) const;

  const GgufFile& file_;
  const char* arch_;
};

// Hyper-parameters that llama.cpp reads with get_key_or_arr: a scalar, or an array of one value
// per layer. *per_layer gets [n_layer] values either way; absent leaves it empty (GEIST_OK).
// GEIST_E_FORMAT for a wrong type, an array of another length or a negative value.
Status read_per_layer_i32(const GgufFile& file, const std::string& key, int32_t n_layer,
                          std::vector<int32_t>* per_layer);

}  // namespace geist
