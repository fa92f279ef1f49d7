// Target-independent helpers of the K-quant kernels (matmul_kq_simd.cpp,
// matmul_kq_groups_simd.cpp): the per-block formula of matmul_simd.h in scalar form, and the
// Q4_K GROUPS16 layout (kernels/matmul.h). Private to src/kernels/simd.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "formats/ggml_type.h"
#include "kernels/quant_blocks.h"
#include "kernels/simd/f16.h"

namespace geist::simd::kq_detail {

using quant_detail::kQ4_KBytes;
using quant_detail::kQ6_KBytes;
using quant_detail::load_u16;

constexpr int64_t kSuper = 256;     // elements per super-block
constexpr int64_t kGroupRows = 16;  // rows per GROUPS16 group

// GROUPS16 (kernels/matmul.h): a super-block of a group holds each row's first bytes / 4 4-byte
// units, unit u of row r at (u * 16 + r) * 4, then the rest (Q6_K's f16 d) of row r at
// units * 64 + r * (bytes % 4).
constexpr int64_t kq_bytes(bool q6) { return q6 ? kQ6_KBytes : kQ4_KBytes; }
constexpr int64_t kq_group_super(bool q6) { return kGroupRows * kq_bytes(q6); }
constexpr int64_t kQ6KGroupD = kQ6_KBytes / 4 * kGroupRows * 4;  // offset of Q6_K's d [16]

// Q4_K's 8 sub-block scales and mins of one super-block, times d and dmin (exact products).
inline void q4k_scales(const uint8_t* blk, float dsc[8], float dmm[8]) {
  const float d = f16_to_f32(load_u16(blk));
  const float dmin = f16_to_f32(load_u16(blk + 2));
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    quant_detail::k_scale_min(blk + 4, j, &sc, &m);
    dsc[j] = d * static_cast<float>(sc);
    dmm[j] = dmin * static_cast<float>(m);
  }
}

// Lane r's super-block s of a GROUPS16 group, back in file order (kq_bytes(q6) bytes at out).
inline const uint8_t* kq_group_row_super(bool q6, const uint8_t* grp, int64_t r, int64_t s,
                                         uint8_t* out) {
  const int64_t bytes = kq_bytes(q6), units = bytes / 4, tail = bytes % 4;
  const uint8_t* sb = grp + s * kq_group_super(q6);
  for (int64_t u = 0; u < units; ++u) {
    std::memcpy(out + 4 * u, sb + (u * kGroupRows + r) * 4, 4);
  }
  std::memcpy(out + 4 * units, sb + units * kGroupRows * 4 + r * tail, static_cast<size_t>(tail));
  return out;
}

// One weight row's super-blocks in either layout: (*this)(s, tmp) points at super-block s in
// file order (GROUPS16: rebuilt into tmp, >= kQ6_KBytes bytes).
struct KqRowBlocks {
  const uint8_t* base;  // ROWS: the row; GROUPS16: its group
  int64_t lane;         // GROUPS16: the row's place in its group
  bool q6;
  bool groups;
  const uint8_t* operator()(int64_t s, uint8_t* tmp) const {
    return groups ? kq_group_row_super(q6, base, lane, s, tmp) : base + s * kq_bytes(q6);
  }
};

inline KqRowBlocks kq_row_blocks(bool q6, bool groups, const uint8_t* src, size_t row_bytes,
                                 int64_t r) {
  if (!groups) return {src + static_cast<size_t>(r) * row_bytes, 0, q6, false};
  return {src + static_cast<size_t>(r / kGroupRows) * kGroupRows * row_bytes, r % kGroupRows, q6,
          true};
}

// Unsigned codes u[32] of 32-block k (0..7) of a super-block (quant_blocks.h layouts).
inline void block_codes(bool q6, const uint8_t* blk, int k, uint8_t u[32]) {
  if (!q6) {
    const uint8_t* qs = blk + 16 + 32 * (k / 2);
    for (int l = 0; l < 32; ++l) u[l] = static_cast<uint8_t>((qs[l] >> (4 * (k % 2))) & 15);
    return;
  }
  const int h = k / 4, kk = k % 4;
  const uint8_t* ql = blk + 64 * h + 32 * (kk % 2);
  const uint8_t* qh = blk + 128 + 32 * h;
  for (int l = 0; l < 32; ++l) {
    u[l] =
        static_cast<uint8_t>(((ql[l] >> (4 * (kk / 2))) & 15) | (((qh[l] >> (2 * kk)) & 3) << 4));
  }
}

// The formula, one (row, token) at a time: act(b, i) is element i of block b's q1 codes.
template <class Act>
float dot_generic(bool q6, const KqRowBlocks& row, int64_t n_in, Act act, const float* dx,
                  const int32_t* sx, int64_t dstride) {
  float acc = 0.0f;
  for (int64_t s = 0; s < n_in / kSuper; ++s) {
    uint8_t tmp[kQ6_KBytes];
    const uint8_t* blk = row(s, tmp);
    float dsc[8], dmm[8];
    if (!q6) q4k_scales(blk, dsc, dmm);
    const float d6 = q6 ? f16_to_f32(load_u16(blk + 208)) : 0.0f;
    for (int k = 0; k < 8; ++k) {
      const int64_t b = s * 8 + k;
      uint8_t u[32];
      block_codes(q6, blk, k, u);
      const float dxb = dx[b * dstride];
      if (q6) {
        const auto* sc = reinterpret_cast<const int8_t*>(blk + 192 + 2 * k);
        int32_t half[2] = {0, 0};
        for (int i = 0; i < 32; ++i) half[i / 16] += (int32_t{u[i]} - 32) * act(b, i);
        const int32_t isum = sc[0] * half[0] + sc[1] * half[1];
        acc = std::fma(static_cast<float>(isum), d6 * dxb, acc);
      } else {
        int32_t isum = 0;
        for (int i = 0; i < 32; ++i) isum += int32_t{u[i]} * act(b, i);
        acc = std::fma(static_cast<float>(isum), dsc[k] * dxb, acc);
        acc = std::fma(dmm[k], -(static_cast<float>(sx[b * dstride]) * dxb), acc);
      }
    }
  }
  return acc;
}

// Rows-layout activations (q [n_tok][2][n_in], dx / sx [n_tok][n_in / 32]) through the formula,
// for `count` rows in either layout: the portable decode path.
inline void kq_rows_generic(bool q6, bool groups, const uint8_t* src, size_t row_bytes, int count,
                            int64_t n_in, const int8_t* q, const float* dx, const int32_t* sx,
                            int64_t n_tok, float* out, int64_t out_stride) {
  const int64_t nb = n_in / 32;
  for (int r = 0; r < count; ++r) {
    const KqRowBlocks row = kq_row_blocks(q6, groups, src, row_bytes, r);
    for (int64_t t = 0; t < n_tok; ++t) {
      const int8_t* qt = q + t * 2 * n_in;
      auto act = [&](int64_t b, int i) { return int32_t{qt[b * 32 + i]}; };
      out[t * out_stride + r] = dot_generic(q6, row, n_in, act, dx + t * nb, sx + t * nb, 1);
    }
  }
}

// dot_kq_rows on GROUPS16 weights (matmul_kq_groups_simd.cpp; same arguments).
void dot_kq_group_rows(bool q6, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                       const int8_t* q, const float* dx, const int32_t* sx, int64_t n_tok,
                       float* out, int64_t out_stride);

}  // namespace geist::simd::kq_detail
