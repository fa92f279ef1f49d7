// AVX-512 VNNI kernels of the I8M forms (matmul_simd.h "I8M"): the super-block forms' (Q2K, Q3K,
// Q5K, IQ4K) decode (src/kernels/simd/matmul_i8m_super_simd.cpp), and every form's prefill,
// which unpacks a 16-row group's codes to 8-bit words (16 rows at a time, in vectors) once for
// all its row quads and token tiles (matmul_i8m_packed_simd.cpp). Private to src/kernels/simd:
// matmul_i8m_simd.cpp calls them where the CPU has AVX-512 VNNI (x86-64 builds only; elsewhere
// these are not defined). Same arguments and bits as dot_i8m_rows / dot_i8m_panels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/simd/matmul_simd.h"

namespace geist::simd::i8m_packed {

// Decode, Q2K / Q3K / Q5K / IQ4K: rows layout activations (q [n_tok][2][n_in] with the half sums at
// q + n_in).
void q2k_rows_vnni(const uint8_t* src, size_t row_bytes, int count, int64_t n_in, const int8_t* q,
                   const float* dx, const int32_t* sx, int64_t n_tok, float* out,
                   int64_t out_stride);
void q3k_rows_vnni(const uint8_t* src, size_t row_bytes, int count, int64_t n_in, const int8_t* q,
                   const float* dx, const int32_t* sx, int64_t n_tok, float* out,
                   int64_t out_stride);
void q5k_rows_vnni(const uint8_t* src, size_t row_bytes, int count, int64_t n_in, const int8_t* q,
                   const float* dx, const int32_t* sx, int64_t n_tok, float* out,
                   int64_t out_stride);
void iq4k_rows_vnni(const uint8_t* src, size_t row_bytes, int count, int64_t n_in, const int8_t* q,
                    const float* dx, const int32_t* sx, int64_t n_tok, float* out,
                    int64_t out_stride);

// Prefill, any form: panels of 16 tokens (pq with the half sums, pdx, psx).
void unpacked_panels_vnni(I8mForm f, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                          const int8_t* pq, const float* pdx, const int32_t* psx, int64_t n_tok,
                          float* out, int64_t out_stride);

}  // namespace geist::simd::i8m_packed
