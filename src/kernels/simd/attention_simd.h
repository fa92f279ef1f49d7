// Highway kernels behind attention_kv() and attention(): run-time dispatched to the best SIMD
// target of the CPU. Private to src/kernels (attention*.cpp and the tests).
//
// Vectors are capped at 8 f32 lanes so that one vector never straddles two 8-value KV blocks
// (the narrowest block, kv_block_for_head_dim); AVX-512 machines run the AVX2-width code.
//
// Determinism: each output's operation order depends only on n and the SIMD target, never on
// nq or on which other rows are processed in the same call.
#pragma once

#include <cstdint>

namespace geist::simd {

// out[j] = sum_i q[j * q_stride + i] * x[i] for j < nq (>= 1), i < n (any n, tails included).
void attn_dot_rows(const float* q, int64_t q_stride, int nq, const float* x, int64_t n, float* out);

// acc[j * acc_stride + i] += w[j] * x[i] for j < nq (>= 1), i < n (any n).
void attn_axpy_rows(const float* w, int nq, const float* x, int64_t n, float* acc,
                    int64_t acc_stride);

// attn_axpy_rows for kAxpyPositions positions in one pass over acc: for r < kAxpyPositions in
// order, acc[j * acc_stride + i] += w[r * w_stride + j] * x[r][i]; bitwise the same as that many
// attn_axpy_rows calls in order, with acc loaded and stored once.
constexpr int kAxpyPositions = 4;
void attn_axpy_rows4(const float* w, int64_t w_stride, int nq, const float* const* x, int64_t n,
                     float* acc, int64_t acc_stride);

// attn_dot_rows and attn_axpy_rows4 over rows of IEEE half values (2 bytes each,
// little-endian, any alignment), widened as they are loaded: bitwise the same as widening them
// with attn_widen_f16 first. n must be a multiple of 8: the vector loops then cover the row, and
// no scalar tail is left (the compiler fuses a tail's multiply-add in one form and not the other
// on some targets; AVX2 did).
void attn_dot_rows_f16(const float* q, int64_t q_stride, int nq, const uint8_t* x, int64_t n,
                       float* out);
void attn_axpy_rows4_f16(const float* w, int64_t w_stride, int nq, const uint8_t* const* x,
                         int64_t n, float* acc, int64_t acc_stride);
// attn_dot_rows_f16 for kDotPositions rows x[r] at once: out[r * out_stride + j] is, bitwise,
// what attn_dot_rows_f16(q, q_stride, nq, x[r], n, out + r * out_stride) writes (each query
// chunk loaded once for the rows). n a multiple of 8, as there.
constexpr int kDotPositions = 4;
void attn_dot_rows4_f16(const float* q, int64_t q_stride, int nq, const uint8_t* const* x,
                        int64_t n, float* out, int64_t out_stride);

// dst[0, n) = IEEE half values src[0, n) (2 bytes each, little-endian, any alignment) widened.
void attn_widen_f16(const uint8_t* src, int64_t n, float* dst);

// Block codes of attention_kv.h, decoded without the Hadamard rotation: nb consecutive blocks of
// `block` (8, 16 or 32) values at src into dst[nb * block].
//   bits 8: Q8 {f16 d; int8 q[B]}  -> d * q
//   bits 4: Q4 {f16 d; u8 q[B/2]}  -> d * (q - 8)
//   bits -8: Q8A {f16 scale; f16 min; u8 q[B]} -> min + scale * q
//   bits -4, -2: A4 / A2 {f16 scale; f16 min; packed} -> min + scale * q
void attn_decode_blocks(int bits, const uint8_t* src, int nb, int32_t block, float* dst);

// Raw scores of the 32 positions of one CH4 / CH2 group (bits 4 or 2) over channels
// [off, off + n): out[j * 32 + r] = sum_c q[j * q_stride + c - off] * (min_c + scale_c * q_c[r]),
// for j < nq (>= 1). The channel blocks are at group + c * block_bytes.
void attn_ch_group_scores(int bits, const uint8_t* group, int64_t block_bytes, int32_t off,
                          int32_t n, const float* q, int64_t q_stride, int nq, float* out);

// In place: x[i] = exp(x[i] - max) / sum (see ops.h softmax) with a vectorised exp (<= 1 ulp
// off std::exp) and the sum taken in vector lanes; a fixed order for a given n.
void attn_softmax(float* x, int64_t n);

}  // namespace geist::simd
