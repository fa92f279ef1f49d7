// Highway kernels behind matmul(): run-time dispatched to the best SIMD target of the CPU
// (AVX-512, AVX2+FMA, SSE4, NEON; EMU128 as the portable fallback). Private to
// src/kernels; matmul.cpp is the only caller outside the tests.
//
// The integer path works on weight rows unpacked to int16 ("I16 rows") and activation rows
// quantized to int16 per 32-element block ("Q16 rows"):
//   W[o][i] ~= dw[o][i/32] * w16[o][i] + (min term)
//   x[t][i] ~= dx[t][i/32] * q16[t][i]
// so sum_i W[o][i] x[t][i] = sum_b dw*dx*isum_b + sum_b mw[o][b] * sx[t][b], where isum_b is
// the exact int32 dot of block b and sx[t][b] = dx * sum(q16 of block b). 16-bit activations
// cost nothing over 8-bit ones here (both go through a 16x16->32 multiply-add), and keep the
// product within f32 rounding of the unquantized one.
//
// Determinism: each output's operation order depends only on n_in and the SIMD target, never
// on how many rows or tokens are processed together.
#pragma once

#include <cstddef>
#include <cstdint>

#include "formats/ggml_type.h"

namespace geist::simd {

constexpr int64_t kQ16Block = 32;  // activation / unpacked weight block

// True for the weight types the integer path unpacks: Q8_0, Q4_0, Q4_K, Q6_K.
bool int16_path_supported(GgmlType t);

// Unpacks `count` consecutive weight rows (row r at src + r * row_bytes, n_in elements,
// n_in % 32 == 0) of a type int16_path_supported accepts.
//   w16: [count][n_in]; dw, mw: [count][n_in / 32]
void unpack_rows_i16(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                     int16_t* w16, float* dw, float* mw);

// Quantizes one activation row of n_in (% 32 == 0) floats: q16 [n_in], dx and sx [n_in / 32].
// Scalar and target-independent: the same bits on every machine.
void quantize_row_q16(const float* x, int64_t n_in, int16_t* q16, float* dx, float* sx);

// out[r] = dot of unpacked weight row r (< count <= 4) with one Q16 activation row.
//   w16: [count][n_in]; dw, mw: [count][n_in / 32]; q16: [n_in]; dx, sx: [n_in / 32]
// mw may be nullptr when the type has no min term (all but Q4_K).
void dot_i16_rows(const int16_t* w16, const float* dw, const float* mw, int count, int64_t n_in,
                  const int16_t* q16, const float* dx, const float* sx, float* out);

// dot_i16_rows for n_tok activation rows at once, in register tiles of rows x tokens (prefill):
// out[t * out_stride + r] gets bitwise what dot_i16_rows gives for token t alone.
//   q16: [n_tok][n_in]; dx, sx: [n_tok][n_in / 32]; out: [n_tok][out_stride]
void dot_i16_batch(const int16_t* w16, const float* dw, const float* mw, int count, int64_t n_in,
                   const int16_t* q16, const float* dx, const float* sx, int64_t n_tok, float* out,
                   int64_t out_stride);

// True for Q8_0 and Q4_0, which dot_packed_rows reads directly.
bool packed_dot_supported(GgmlType t);

// The same as unpack_rows_i16 followed by dot_i16_rows (bitwise), reading the packed rows
// directly: for decode, where each unpacked row would be used once.
void dot_packed_rows(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                     const int16_t* q16, const float* dx, float* out);

// dst[0, n) = F16 or BF16 row src, widened to f32.
void widen_row_f32(GgmlType t, const uint8_t* src, float* dst, int64_t n);

// out[r] = sum_i rows[r][i] * x[i] in f32, for r < count <= 4; any n (tails included).
void dot_f32_rows(const float* const rows[4], int count, const float* x, int64_t n, float* out);

// Name of the SIMD target the dispatcher picked on this CPU (for logs and benchmarks).
const char* target_name();

}  // namespace geist::simd
