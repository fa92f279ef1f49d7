// The I8M form of the GROUPS16 layout (kernels/matmul.h, kernels/simd/matmul_simd.h): Q4_1 and
// Q5_1 rows as packed codes with an f16 scale and min per 32-block; Q2_K, Q3_K, Q5_K and IQ4_XS
// rows as the file's super-blocks transposed over a group; exactly the file's values. Private to
// src/kernels (weight_layout.cpp).
#pragma once

#include <array>
#include <cstdint>

#include "kernels/matmul.h"

namespace geist::i8m {

// One 32-block of a row in I8M terms: value i = s * w[i] - m * (i < 16 ? m0 : m1).
struct Block {
  float s = 0.0f, m = 0.0f;
  int16_t m0 = 0, m1 = 0;
  std::array<int8_t, 32> w = {};
};

// Block b of a file row of type t (one of simd::i8m_type's per-block forms), exactly.
void file_block(GgmlType t, const uint8_t* row, int64_t b, Block* out);

// Writes the ROWS matrix w (an I8M type, whole blocks) into dst, simd::i8m_row_bytes(type,
// n_in) * ceil(n_out / 16) * 16 bytes; padding rows have scale and min 0.
void to_groups16(const WeightMatrix& w, uint8_t* dst);

// Row `row` of an I8M GROUPS16 matrix, dequantized: the bits dequantize_row gives for the file.
void get_row(const WeightMatrix& w, int64_t row, float* dst);

}  // namespace geist::i8m
