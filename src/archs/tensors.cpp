#include "archs/tensors.h"

#include <cmath>

#include "kernels/quant.h"

namespace geist {
namespace {

// Indexed by Tn; llama.cpp's LLM_TENSOR_NAMES without the "blk.%d." of per-layer tensors.
constexpr const char* kNames[] = {
    "token_embd",  "output_norm",
    "output",      "rope_freqs",
    "attn_norm",   "attn_q",
    "attn_k",      "attn_v",
    "attn_output", "attn_q_norm",
    "attn_k_norm", "attn_qkv",
    "attn_gate",   "post_attention_norm",
    "ffn_norm",    "ffn_gate",
    "ffn_up",      "ffn_down",
    "ssm_a",       "ssm_conv1d",
    "ssm_dt",      "ssm_alpha",
    "ssm_beta",    "ssm_norm",
    "ssm_out",
};
static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<size_t>(Tn::SSM_OUT) + 1,
              "one name per Tn");

std::string shape_of(const GgufTensorInfo& t) {
  std::string s = "[";
  for (int d = 0; d < 4; ++d) {
    if (d > 0) s.append(", ");
    s.append(std::to_string(t.ne[d]));
  }
  s.push_back(']');
  return s;
}

}  // namespace

std::string tn(Tn t, const char* suffix, int32_t layer) {
  // Appended piece by piece: GCC 12 misreports chained operator+ here (-Wrestrict).
  std::string s;
  if (layer >= 0) {
    s.append("blk.");
    s.append(std::to_string(layer));
    s.push_back('.');
  }
  s.append(kNames[static_cast<size_t>(t)]);
  if (suffix != nullptr && suffix[0] != '\0') {
    s.push_back('.');
    s.append(suffix);
  }
  return s;
}

Status TensorChecks::error(geist_status code, const std::string& msg) const {
  return Status(code, std::string(arch_) + ": " + msg);
}

Status TensorChecks::find(const std::string& name, int64_t ne0, int64_t ne1,
                          const GgufTensorInfo** out) const {
  const GgufTensorInfo* t = file_.find_tensor(name);
  if (!t) return error(GEIST_E_FORMAT, "tensor '" + name + "' is missing");
  const uint32_t want_dims = ne1 == 0 ? 1 : 2;
  const bool shape_ok = t->ne[0] == ne0 && t->ne[1] == (ne1 == 0 ? 1 : ne1) && t->ne[2] == 1 &&
                        t->ne[3] == 1 && t->n_dims <= want_dims;
  if (!shape_ok) {
    return error(GEIST_E_FORMAT, "tensor '" + name + "' has shape " + shape_of(*t) +
                                     "; expected [" + std::to_string(ne0) + ", " +
                                     std::to_string(ne1 == 0 ? 1 : ne1) + "]");
  }
  if (!quant_type_supported(t->type)) {
    return error(GEIST_E_UNSUPPORTED,
                 "tensor '" + name + "' has unsupported type " + ggml_type_name(t->type));
  }
  const size_t row_bytes = ggml_row_size(t->type, ne0);
  const uint64_t rows = static_cast<uint64_t>(ne1 == 0 ? 1 : ne1);
  if (row_bytes == 0 || t->nbytes < row_bytes * rows) {
    return error(GEIST_E_FORMAT, "tensor '" + name + "': a row of " + std::to_string(ne0) +
                                     " is not whole " + ggml_type_name(t->type) +
                                     " blocks, or the data is truncated");
  }
  if (t->type == GgmlType::F32 && reinterpret_cast<uintptr_t>(t->data) % alignof(float) != 0) {
    return error(GEIST_E_FORMAT, "tensor '" + name + "' data is misaligned");
  }
  *out = t;
  return Status::ok();
}

Status TensorChecks::matrix(const std::string& name, int64_t n_in, int64_t n_out,
                            WeightMatrix* out) const {
  const GgufTensorInfo* t = nullptr;
  GEIST_RETURN_IF_ERROR(find(name, n_in, n_out, &t));
  *out = WeightMatrix{t->type, t->data, n_in, n_out, ggml_row_size(t->type, n_in)};
  return Status::ok();
}

Status TensorChecks::f32_view(const std::string& name, int64_t n, const float** out) const {
  const GgufTensorInfo* t = nullptr;
  GEIST_RETURN_IF_ERROR(find(name, n, 0, &t));
  if (t->type != GgmlType::F32) {
    return error(GEIST_E_UNSUPPORTED, "tensor '" + name + "' has type " + ggml_type_name(t->type) +
                                          "; only f32 is supported");
  }
  *out = reinterpret_cast<const float*>(t->data);
  return Status::ok();
}

Status TensorChecks::f32_copy(const std::string& name, int64_t ne0, int64_t ne1,
                              std::vector<float>* out) const {
  const GgufTensorInfo* t = nullptr;
  GEIST_RETURN_IF_ERROR(find(name, ne0, ne1, &t));
  const int64_t rows = ne1 == 0 ? 1 : ne1;
  out->resize(static_cast<size_t>(ne0 * rows));
  const size_t row_bytes = ggml_row_size(t->type, ne0);
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(t->type, t->data + static_cast<size_t>(r) * row_bytes, out->data() + r * ne0,
                   ne0);
  }
  for (float x : *out) {
    if (!std::isfinite(x)) {
      return error(GEIST_E_FORMAT, "tensor '" + name + "' holds a non-finite value");
    }
  }
  return Status::ok();
}

Status read_per_layer_i32(const GgufFile& file, const std::string& key, int32_t n_layer,
                          std::vector<int32_t>* per_layer) {
  per_layer->clear();
  const GgufKv* kv = file.find(key);
  if (!kv) return Status::ok();
  if (kv->type == GgufValueType::ARRAY) {
    Status st = file.get_arr_i32(key, per_layer);
    if (!st) return Status(GEIST_E_FORMAT, st.message());
    if (per_layer->size() != static_cast<size_t>(n_layer)) {
      return Status::error(GEIST_E_FORMAT, "%s holds %zu values for %d layers", key.c_str(),
                           per_layer->size(), n_layer);
    }
  } else {
    int32_t v = 0;
    Status st = file.get_i32(key, &v);
    if (!st) return Status(GEIST_E_FORMAT, st.message());
    per_layer->assign(static_cast<size_t>(n_layer), v);
  }
  for (int32_t v : *per_layer) {
    if (v < 0) return Status::error(GEIST_E_FORMAT, "%s holds a negative value", key.c_str());
  }
  return Status::ok();
}

}  // namespace geist
