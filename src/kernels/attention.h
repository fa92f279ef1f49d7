// Grouped-query causal attention over K/V rows handed in as strided f32 spans.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/thread_pool.h"

namespace geist {

struct AttentionShape {
  int32_t n_head = 0;
  int32_t n_head_kv = 0;   // divides n_head; query head h reads kv head h / (n_head / n_head_kv)
  int32_t head_dim_k = 0;  // q and k head size
  int32_t head_dim_v = 0;  // v and output head size
  float scale = 0;         // score multiplier, usually 1 / sqrt(head_dim_k)
};

// Floats of scratch attention() needs for kv_len key positions on n_threads threads.
size_t attention_scratch_floats(int32_t kv_len, int n_threads);

// For each token t < n_tok at position pos0 + t and each query head h:
//   out[t][h] = sum_{p <= pos0 + t} softmax_p(scale * q[t][h] . k[p][g]) * v[p][g]
// with g the kv head of h. Scores are softmaxed in position order and v rows accumulated in
// position order, so a row's bits depend only on its own inputs, never on n_tok or threads.
//   q:   [n_tok][q_stride], head h at + h * head_dim_k
//   k:   [>= pos0 + n_tok][k_stride], position-major, kv head g at + g * head_dim_k
//   v:   [>= pos0 + n_tok][v_stride], position-major, kv head g at + g * head_dim_v
//   out: [n_tok][out_stride], head h at + h * head_dim_v
//   scratch: >= attention_scratch_floats(pos0 + n_tok, pool.n_threads()) floats
// Work is split over (token, head) pairs. Does not allocate. Scores and V accumulation use
// the SIMD kernels of kernels/simd/attention_simd.h (bitwise attention_kv() over F32 rows).
void attention(const AttentionShape& s, const float* q, int64_t q_stride, int32_t n_tok,
               int32_t pos0, const float* k, int64_t k_stride, const float* v, int64_t v_stride,
               float* out, int64_t out_stride, float* scratch, ThreadPool& pool);

// The scalar version of attention(), kept as the test oracle. Same arguments and scratch.
void attention_reference(const AttentionShape& s, const float* q, int64_t q_stride, int32_t n_tok,
                         int32_t pos0, const float* k, int64_t k_stride, const float* v,
                         int64_t v_stride, float* out, int64_t out_stride, float* scratch,
                         ThreadPool& pool);

}  // namespace geist
