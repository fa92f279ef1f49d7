// Kernels of the gated DeltaNet token mixer (Qwen3.5's linear-attention layers): causal
// depthwise conv1d with a rolling state, the gated delta rule in recurrent and chunked form,
// and the small element-wise helpers around them. Inputs, outputs and the recurrent state are
// f32; the delta rule accumulates in double, which keeps chunked prefill and token-by-token
// decode (different evaluation orders of the same sums) within a few f32 ulps of each other.
// Single-threaded (the chunked rule vectorised, the rest scalar): callers split work over channels
// or heads, and every output element is computed by the same sequence of operations whatever the
// split, so results do not depend on threading.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace geist {

// ---- element-wise helpers ----

inline float sigmoid_f32(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// log(1 + exp(x)), returning x itself above 20 (as torch's softplus does) so that large inputs
// neither overflow nor lose precision.
float softplus_f32(float x);
// x[i] *= sigmoid(x[i]) for i in [0, n).
void silu_inplace(float* x, int64_t n);
// x[i] <- x[i] / sqrt(sum_j x[j]^2 + eps) over one vector of length d. The eps inside the
// square root matches the Hugging Face / FLA definition used by Qwen3.5.
void l2_norm_inplace(float* x, int32_t d, float eps);
// out[i] = w[i] * x[i] / sqrt(mean(x^2) + eps) * silu(z[i]) for one vector of length d
// (RMSNorm of the DeltaNet output, gated by SiLU(z)). out may alias x.
void rms_norm_gated(const float* x, const float* z, const float* w, int32_t d, float eps,
                    float* out);

// ---- causal depthwise conv1d ----

// out[t][c] = sum_{j<kernel} w[c][j] * in[t - (kernel-1) + j][c], where in[s] for s < 0 comes
// from `state` (the last kernel-1 inputs of the previous calls, oldest first) and in[s] for
// s >= 0 is x row s. Only channels [c_begin, c_end) are computed and their state columns then
// advanced to the last kernel-1 inputs, so disjoint channel ranges may run in parallel.
// The sum runs over j in a fixed order, so splitting a sequence into several calls gives
// bitwise the same outputs as one call.
//   x:     row t at x + t * x_stride, channel c at offset c
//   w:     [n_ch][kernel], row-major (GGUF ssm_conv1d: ne = {kernel, n_ch})
//   state: [kernel-1][n_ch], time-major, oldest row first
//   out:   row t at out + t * out_stride, channel c at offset c (must not alias x)
void conv1d_causal(const float* x, int64_t x_stride, int64_t n, int64_t n_ch, const float* w,
                   int32_t kernel, float* state, float* out, int64_t out_stride, int64_t c_begin,
                   int64_t c_end);

// ---- gated delta rule ----

// Inputs of one call of the gated delta rule over n_tokens consecutive tokens. For value head
// h (key head kh = h % n_k_heads, the tiled grouping GGUF files use), per token t:
//   S <- exp(g[t][h]) * S
//   u  = beta[t][h] * (v_t - S^T k_t)
//   S <- S + k_t u^T
//   o_t = S^T q_t
// q and k are expected L2-normalised, q already scaled by 1/sqrt(d_k).
struct GatedDeltaArgs {
  int64_t n_tokens = 0;
  int32_t n_k_heads = 0;
  int32_t n_v_heads = 0;
  int32_t d_k = 0;
  int32_t d_v = 0;
  const float* q = nullptr;  // row t at q + t * q_stride: [n_k_heads][d_k]
  int64_t q_stride = 0;
  const float* k = nullptr;  // row t at k + t * k_stride: [n_k_heads][d_k]
  int64_t k_stride = 0;
  const float* v = nullptr;  // row t at v + t * v_stride: [n_v_heads][d_v]
  int64_t v_stride = 0;
  const float* g = nullptr;     // [n_tokens][n_v_heads], log-space decay (<= 0)
  const float* beta = nullptr;  // [n_tokens][n_v_heads], write strength in (0, 1)
  float* state = nullptr;       // [n_v_heads][d_k][d_v], updated in place
  float* out = nullptr;         // row t at out + t * out_stride: [n_v_heads][d_v]
  int64_t out_stride = 0;
};

// Doubles of scratch either form needs for one thread (chunk is ignored by the recurrent form;
// pass the chunk size the chunked form will use).
size_t gated_delta_rule_scratch_doubles(int32_t chunk, int32_t d_k, int32_t d_v);

// Token-by-token form, value heads [h_begin, h_end). Cost O(n d_k d_v) per head.
// scratch: gated_delta_rule_scratch_doubles(any chunk >= 1, d_k, d_v) doubles, per thread.
// SIMD (src/kernels/simd/deltanet_recurrent_simd.cpp, run-time dispatched) where d_v is a
// multiple of the double vector length, otherwise the reference below; the two are bitwise
// equal (the vector form runs each value lane's double operations in the reference's order,
// with no fused multiply-adds: both files are compiled with -ffp-contract=off).
void gated_delta_rule_recurrent(const GatedDeltaArgs& a, int32_t h_begin, int32_t h_end,
                                double* scratch);
// The scalar form, kept as the oracle for the SIMD one. Same arguments.
void gated_delta_rule_recurrent_reference(const GatedDeltaArgs& a, int32_t h_begin, int32_t h_end,
                                          double* scratch);

// Chunked (WY / UT-transform) form, value heads [h_begin, h_end): the sequence is cut into
// chunks of `chunk` tokens (the last may be shorter); inside a chunk the corrections u are
// found by forward substitution of a unit lower-triangular system and the outputs and the
// state update are matrix products, so the cost is O(n (chunk + d_k) d_v) per head.
// Mathematically equal to the recurrent form; in f32 they agree to rounding.
// scratch: gated_delta_rule_scratch_doubles(chunk, d_k, d_v) doubles, not shared between
// threads.
// SIMD (src/kernels/simd/deltanet_simd.cpp, run-time dispatched) where d_k is a multiple of
// the double vector length and d_v of twice it; otherwise the reference below. The vector form
// uses fused multiply-adds and lane-wise partial sums, so it differs from the reference by
// double rounding; each head's result still depends only on its inputs (not on the head split).
void gated_delta_rule_chunked(const GatedDeltaArgs& a, int32_t chunk, int32_t h_begin,
                              int32_t h_end, double* scratch);
// The scalar form, kept as the oracle for the SIMD one. Same arguments.
void gated_delta_rule_chunked_reference(const GatedDeltaArgs& a, int32_t chunk, int32_t h_begin,
                                        int32_t h_end, double* scratch);

}  // namespace geist
