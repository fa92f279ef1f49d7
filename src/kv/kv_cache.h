// Per-session key/value cache for the attention layers of a model (any subset of its layers:
// hybrid models have recurrent layers without KV).
//
// Storage (mode F32): for each attention layer, K is [max_seq_len][n_embd_k] and V is
// [max_seq_len][n_embd_v], position-major, so the used prefix [0, n) of a layer is one
// contiguous region (snapshots copy exactly those bytes). Callers write rows for positions and
// ask for a view to read them; they never touch the storage layout directly, so quantized
// modes can be added behind the same interface.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"

namespace geist {

enum class KvMode {
  F32,
};

// One entry per model layer; a layer without attention has n_embd_k == n_embd_v == 0.
struct KvLayerSpec {
  int32_t n_embd_k = 0;  // n_head_kv * head_dim_k
  int32_t n_embd_v = 0;  // n_head_kv * head_dim_v
};

// What the attention kernel reads for one layer: rows [0, n_pos) as strided f32 spans.
struct KvLayerView {
  const float* k = nullptr;  // [n_pos][k_stride], position-major
  int64_t k_stride = 0;
  const float* v = nullptr;  // [n_pos][v_stride], position-major
  int64_t v_stride = 0;
};

class KvCache {
 public:
  // GEIST_E_INVALID_ARG for max_seq_len <= 0 or negative sizes, GEIST_E_OOM.
  static Status create(KvMode mode, const std::vector<KvLayerSpec>& layers, int32_t max_seq_len,
                       std::unique_ptr<KvCache>* out);

  KvMode mode() const { return mode_; }
  int32_t max_seq_len() const { return max_seq_len_; }
  int32_t n_layer() const { return static_cast<int32_t>(layers_.size()); }
  bool has_layer(int32_t il) const;

  // Stores rows for positions [pos, pos + n) of attention layer il.
  //   k: [n][k_stride], the first n_embd_k floats of each row; v likewise with n_embd_v.
  // Caller guarantees has_layer(il) and 0 <= pos, pos + n <= max_seq_len() (checked).
  void write(int32_t il, int32_t pos, int32_t n, const float* k, int64_t k_stride, const float* v,
             int64_t v_stride);

  // Rows [0, n_pos) of attention layer il, valid until the next write. n_pos <= max_seq_len().
  KvLayerView view(int32_t il, int32_t n_pos) const;

  // Bytes held by the cache (all layers, K and V).
  size_t size_bytes() const;

 private:
  struct Layer {
    KvLayerSpec spec;
    std::vector<float> k;  // [max_seq_len][n_embd_k], position-major
    std::vector<float> v;  // [max_seq_len][n_embd_v], position-major
  };
  KvCache() = default;

  KvMode mode_ = KvMode::F32;
  int32_t max_seq_len_ = 0;
  std::vector<Layer> layers_;  // [n_layer]; empty vectors for layers without attention
};

}  // namespace geist
