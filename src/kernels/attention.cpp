#include "kernels/attention.h"

#include "base/status.h"
#include "kernels/ops.h"
#include "kernels/simd/attention_simd.h"

namespace geist {

size_t attention_scratch_floats(int32_t kv_len, int n_threads) {
  return static_cast<size_t>(kv_len) * static_cast<size_t>(n_threads);
}

void attention(const AttentionShape& s, const float* q, int64_t q_stride, int32_t n_tok,
               int32_t pos0, const float* k, int64_t k_stride, const float* v, int64_t v_stride,
               float* out, int64_t out_stride, float* scratch, ThreadPool& pool) {
  GEIST_CHECK(s.n_head > 0 && s.n_head_kv > 0 && s.n_head % s.n_head_kv == 0,
              "attention: n_head must be a positive multiple of n_head_kv");
  const int32_t group = s.n_head / s.n_head_kv;
  const int32_t kv_len = pos0 + n_tok;
  const int64_t n_items = static_cast<int64_t>(n_tok) * s.n_head;
  pool.run([&](int ti, int nt) {
    float* scores = scratch + static_cast<size_t>(ti) * kv_len;  // [kv_len]
    const int64_t begin = n_items * ti / nt;
    const int64_t end = n_items * (ti + 1) / nt;
    for (int64_t item = begin; item < end; ++item) {
      const int32_t t = static_cast<int32_t>(item / s.n_head);
      const int32_t h = static_cast<int32_t>(item % s.n_head);
      const int32_t g = h / group;
      const int32_t n_pos = pos0 + t + 1;  // causal: keys [0, pos0 + t]
      const float* qh = q + t * q_stride + static_cast<int64_t>(h) * s.head_dim_k;
      for (int32_t p = 0; p < n_pos; ++p) {
        const float* kp = k + p * k_stride + static_cast<int64_t>(g) * s.head_dim_k;
        float dot;
        simd::attn_dot_rows(qh, s.head_dim_k, 1, kp, s.head_dim_k, &dot);
        scores[p] = dot * s.scale;
      }
      simd::attn_softmax(scores, n_pos);
      float* oh = out + t * out_stride + static_cast<int64_t>(h) * s.head_dim_v;
      for (int32_t d = 0; d < s.head_dim_v; ++d) oh[d] = 0;
      for (int32_t p = 0; p < n_pos; ++p) {
        const float* vp = v + p * v_stride + static_cast<int64_t>(g) * s.head_dim_v;
        simd::attn_axpy_rows(scores + p, 1, vp, s.head_dim_v, oh, s.head_dim_v);
      }
    }
  });
}

void attention_reference(const AttentionShape& s, const float* q, int64_t q_stride, int32_t n_tok,
                         int32_t pos0, const float* k, int64_t k_stride, const float* v,
                         int64_t v_stride, float* out, int64_t out_stride, float* scratch,
                         ThreadPool& pool) {
  GEIST_CHECK(s.n_head > 0 && s.n_head_kv > 0 && s.n_head % s.n_head_kv == 0,
              "attention: n_head must be a positive multiple of n_head_kv");
  const int32_t group = s.n_head / s.n_head_kv;
  const int32_t kv_len = pos0 + n_tok;
  const int64_t n_items = static_cast<int64_t>(n_tok) * s.n_head;
  pool.run([&](int ti, int nt) {
    float* scores = scratch + static_cast<size_t>(ti) * kv_len;  // [kv_len]
    const int64_t begin = n_items * ti / nt;
    const int64_t end = n_items * (ti + 1) / nt;
    for (int64_t item = begin; item < end; ++item) {
      const int32_t t = static_cast<int32_t>(item / s.n_head);
      const int32_t h = static_cast<int32_t>(item % s.n_head);
      const int32_t g = h / group;
      const int32_t n_pos = pos0 + t + 1;  // causal: keys [0, pos0 + t]
      const float* qh = q + t * q_stride + static_cast<int64_t>(h) * s.head_dim_k;
      for (int32_t p = 0; p < n_pos; ++p) {
        const float* kp = k + p * k_stride + static_cast<int64_t>(g) * s.head_dim_k;
        scores[p] = dot_f32(qh, kp, s.head_dim_k) * s.scale;
      }
      softmax(scores, n_pos);
      float* oh = out + t * out_stride + static_cast<int64_t>(h) * s.head_dim_v;
      for (int32_t d = 0; d < s.head_dim_v; ++d) oh[d] = 0;
      for (int32_t p = 0; p < n_pos; ++p) {
        const float* vp = v + p * v_stride + static_cast<int64_t>(g) * s.head_dim_v;
        const float w = scores[p];
        for (int32_t d = 0; d < s.head_dim_v; ++d) oh[d] += w * vp[d];
      }
    }
  });
}

}  // namespace geist
