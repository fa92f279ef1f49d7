// Q5_0 and IQ4_NL in the GROUPS16 layout with their codes kept packed (the "Q8P" form,
// kernels/matmul.h): the one-plane formula of matmul_simd.h (Q4_0's; q8_planes) on their values,
// an 8-bit integer times the block's f16 scale: per block isum = dot(w, q1), exact, then
// acc = fma(float(isum), dw * dx_b, acc). Their steps (max / 16, IQ4_NL's non-linear grid) are
// 8x coarser than q1's, so a second activation plane, which doubles the multiply-adds, changes
// the product's error by under a percent (llama.cpp takes q8_0 activations for them too).
// src/kernels/simd/matmul_q8_packed_simd.cpp; private to src/kernels.
//
// Layout: a group's block b (16 rows, q8p_group_block bytes at group + b * q8p_group_block)
// holds the 16 rows' f16 scales (row r at 2r), then 4 nibble units, unit u of row r at
// 32 + (u * 16 + r) * 4 with elements 4u..4u+3 in its low nibbles and 16 + 4u.. in its high ones
// (the file's qs bytes 4u..4u+3), then (Q5_0) each row's high bits as a 32-bit word at
// 288 + 4r, byte k holding element 4u + k's in bit u and element 16 + 4u + k's in bit 4 + u.
// IQ4_NL's nibbles index kIq4Values; Q5_0's value is (nibble | high << 4) - 16. The bytes per
// row and block are the file's (18 / 22).
#pragma once

#include <cstddef>
#include <cstdint>

#include "formats/ggml_type.h"

namespace geist::simd {

inline bool q8p_type(GgmlType t) { return t == GgmlType::Q5_0 || t == GgmlType::IQ4_NL; }
constexpr int64_t kQ8pHighAt = 288;
inline int64_t q8p_group_block(GgmlType t) { return t == GgmlType::Q5_0 ? 352 : 288; }

// dot_q8_rows / dot_q8_panels (groups == true) for Q8P weights; the activations with one plane.
void dot_q8p_rows(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                  const int8_t* q, const float* dx, const int32_t* sx, int64_t n_tok, float* out,
                  int64_t out_stride);
void dot_q8p_panels(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                    const int8_t* pq, const float* pdx, const int32_t* psx, int64_t n_tok,
                    float* out, int64_t out_stride);

// The signed 8-bit values w[32] and the f16 scale of lane `lane`'s block b in the group at grp.
uint16_t q8p_block(GgmlType t, const uint8_t* grp, int64_t lane, int64_t b, int8_t w[32]);

}  // namespace geist::simd
