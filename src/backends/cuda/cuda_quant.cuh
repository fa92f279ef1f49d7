// Device-side decoding of the GGUF weight blocks (the layouts of src/kernels/quant_blocks.h).
//
// Each decoder writes 8 consecutive elements [i0, i0 + 8) of one row (i0 a multiple of 8),
// with the CPU dequantizers' arithmetic order and explicit round-to-nearest intrinsics so that
// nvcc cannot contract a multiply and a subtract into an FMA: a decoded weight is bitwise the
// value dequantize_row() gives (the get_rows test checks exactly that).
// Rows are only 2-byte aligned (Q8_0 blocks are 34 bytes), so halves are read as aligned u16
// and quants as bytes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "formats/ggml_type.h"

namespace geist::cuda {

__device__ __forceinline__ float ld_half(const uint8_t* p) {
  return __half2float(__ushort_as_half(*reinterpret_cast<const unsigned short*>(p)));
}

template <GgmlType T>
struct WeightDecoder;

// Elements past n_in (only possible for the float types, whose rows have any length) decode as
// zero; the quantized types have n_in a multiple of their block.
template <>
struct WeightDecoder<GgmlType::F32> {
  static __device__ __forceinline__ void load8(const uint8_t* row, int64_t i0, int64_t n_in,
                                               float w[8]) {
    const float* r = reinterpret_cast<const float*>(row);
#pragma unroll
    for (int j = 0; j < 8; ++j) w[j] = i0 + j < n_in ? r[i0 + j] : 0.0f;
  }
};

template <>
struct WeightDecoder<GgmlType::F16> {
  static __device__ __forceinline__ void load8(const uint8_t* row, int64_t i0, int64_t n_in,
                                               float w[8]) {
#pragma unroll
    for (int j = 0; j < 8; ++j) w[j] = i0 + j < n_in ? ld_half(row + 2 * (i0 + j)) : 0.0f;
  }
};

template <>
struct WeightDecoder<GgmlType::BF16> {
  static __device__ __forceinline__ void load8(const uint8_t* row, int64_t i0, int64_t n_in,
                                               float w[8]) {
    const unsigned short* r = reinterpret_cast<const unsigned short*>(row);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      w[j] = i0 + j < n_in ? __uint_as_float(static_cast<uint32_t>(r[i0 + j]) << 16) : 0.0f;
    }
  }
};

// Q8_0 (34 B / 32): d f16 @0, int8 qs[32] @2; value = q * d.
template <>
struct WeightDecoder<GgmlType::Q8_0> {
  static __device__ __forceinline__ void load8(const uint8_t* row, int64_t i0, int64_t,
                                               float w[8]) {
    const uint8_t* blk = row + (i0 / 32) * 34;
    const int o = static_cast<int>(i0 % 32);
    const float d = ld_half(blk);
    const int8_t* qs = reinterpret_cast<const int8_t*>(blk + 2);
#pragma unroll
    for (int j = 0; j < 8; ++j) w[j] = __fmul_rn(static_cast<float>(qs[o + j]), d);
  }
};

// Q4_0 (18 B / 32): d f16 @0, qs[16] @2; element e < 16 low nibble of qs[e], else high
// nibble of qs[e - 16]; value = (q - 8) * d.
template <>
struct WeightDecoder<GgmlType::Q4_0> {
  static __device__ __forceinline__ void load8(const uint8_t* row, int64_t i0, int64_t,
                                               float w[8]) {
    const uint8_t* blk = row + (i0 / 32) * 18;
    const int o = static_cast<int>(i0 % 32);  // 0, 8, 16 or 24: never straddles the halves
    const float d = ld_half(blk);
    const uint8_t* qs = blk + 2 + (o & 15);
    const int shift = o >= 16 ? 4 : 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int q = (qs[j] >> shift) & 0xF;
      w[j] = __fmul_rn(static_cast<float>(q - 8), d);
    }
  }
};

// Q4_K (144 B / 256): d @0, dmin @2, packed 6-bit scales[12] @4, qs[128] @16; 64-element
// chunk c: qs[32c + l] low nibble = element 64c + l, high nibble = 64c + 32 + l;
// value = (d * sc) * q - (dmin * m) for the 32-element sub-block's (sc, m).
template <>
struct WeightDecoder<GgmlType::Q4_K> {
  static __device__ __forceinline__ void load8(const uint8_t* row, int64_t i0, int64_t,
                                               float w[8]) {
    const uint8_t* blk = row + (i0 / 256) * 144;
    const int e0 = static_cast<int>(i0 % 256);
    const int sub = e0 / 32;
    const uint8_t* scales = blk + 4;
    int sc, m;
    if (sub < 4) {
      sc = scales[sub] & 63;
      m = scales[sub + 4] & 63;
    } else {
      sc = (scales[sub + 4] & 0xF) | ((scales[sub - 4] >> 6) << 4);
      m = (scales[sub + 4] >> 4) | ((scales[sub] >> 6) << 4);
    }
    const float d1 = __fmul_rn(ld_half(blk), static_cast<float>(sc));
    const float m1 = __fmul_rn(ld_half(blk + 2), static_cast<float>(m));
    const int c = e0 / 64;
    const int within = e0 % 64;  // multiple of 8: the 8 elements share one nibble half
    const uint8_t* qs = blk + 16 + 32 * c + (within & 31);
    const int shift = within >= 32 ? 4 : 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int q = (qs[j] >> shift) & 0xF;
      w[j] = __fsub_rn(__fmul_rn(d1, static_cast<float>(q)), m1);
    }
  }
};

// Q6_K (210 B / 256): ql[128] @0, qh[64] @128, int8 scales[16] @192, d f16 @208. Element e:
// half h = e / 128, r = e % 128, l = r % 32, quarter k = r / 32; low nibble (k < 2) or high
// nibble (k >= 2) of ql[64h + l + 32 (k & 1)], top bits (qh[32h + l] >> 2k) & 3;
// value = (d * scales[e / 16]) * (q - 32).
template <>
struct WeightDecoder<GgmlType::Q6_K> {
  static __device__ __forceinline__ void load8(const uint8_t* row, int64_t i0, int64_t,
                                               float w[8]) {
    const uint8_t* blk = row + (i0 / 256) * 210;
    const int e0 = static_cast<int>(i0 % 256);
    const float d = ld_half(blk + 208);
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192);
    const float ds = __fmul_rn(d, static_cast<float>(sc[e0 / 16]));  // 8 elements: one scale
    const int h = e0 / 128;
    const int r = e0 % 128;
    const int k = r / 32;
    const int l0 = r % 32;
    const uint8_t* ql = blk + 64 * h + 32 * (k & 1) + l0;
    const uint8_t* qh = blk + 128 + 32 * h + l0;
    const int nshift = k >= 2 ? 4 : 0;
    const int hshift = 2 * k;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int q = (((ql[j] >> nshift) & 0xF) | (((qh[j] >> hshift) & 3) << 4)) - 32;
      w[j] = __fmul_rn(ds, static_cast<float>(q));
    }
  }
};

// Q4_1 (20 B / 32): d @0, m @2, qs[16] @4 (nibbles as Q4_0); value = q * d + m.
// Q5_1 (24 B / 32): d @0, m @2, qh u32 @4 (bit e: the 5th bit of element e), qs[16] @8.
template <bool kFive>
struct LegacyMinDecoder {
  static __device__ __forceinline__ void load8(const uint8_t* row, int64_t i0, int64_t,
                                               float w[8]) {
    const uint8_t* blk = row + (i0 / 32) * (kFive ? 24 : 20);
    const int o = static_cast<int>(i0 % 32);  // 0, 8, 16 or 24: never straddles the halves
    const float d = ld_half(blk);
    const float m = ld_half(blk + 2);
    uint32_t qh = 0;
    if constexpr (kFive) {
      qh = static_cast<uint32_t>(*reinterpret_cast<const unsigned short*>(blk + 4)) |
           static_cast<uint32_t>(*reinterpret_cast<const unsigned short*>(blk + 6)) << 16;
    }
    const uint8_t* qs = blk + (kFive ? 8 : 4) + (o & 15);
    const int shift = o >= 16 ? 4 : 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int q = ((qs[j] >> shift) & 0xF) | static_cast<int>(((qh >> (o + j)) & 1u) << 4);
      w[j] = __fadd_rn(__fmul_rn(static_cast<float>(q), d), m);
    }
  }
};
template <>
struct WeightDecoder<GgmlType::Q4_1> : LegacyMinDecoder<false> {};
template <>
struct WeightDecoder<GgmlType::Q5_1> : LegacyMinDecoder<true> {};

// Q5_K (176 B / 256): d @0, dmin @2, scales[12] @4 (as Q4_K), qh[32] @16, qs[128] @48; element
// 64c + l (l < 32) low nibble of qs[32c + l] and 5th bit qh[l] bit 2c, element 64c + 32 + l high
// nibble and bit 2c + 1; value = (d * sc) * q - (dmin * m) per 32-element sub-block.
template <>
struct WeightDecoder<GgmlType::Q5_K> {
  static __device__ __forceinline__ void load8(const uint8_t* row, int64_t i0, int64_t,
                                               float w[8]) {
    const uint8_t* blk = row + (i0 / 256) * 176;
    const int e0 = static_cast<int>(i0 % 256);
    const int sub = e0 / 32;
    const uint8_t* scales = blk + 4;
    int sc, m;
    if (sub < 4) {
      sc = scales[sub] & 63;
      m = scales[sub + 4] & 63;
    } else {
      sc = (scales[sub + 4] & 0xF) | ((scales[sub - 4] >> 6) << 4);
      m = (scales[sub + 4] >> 4) | ((scales[sub] >> 6) << 4);
    }
    const float d1 = __fmul_rn(ld_half(blk), static_cast<float>(sc));
    const float m1 = __fmul_rn(ld_half(blk + 2), static_cast<float>(m));
    const int l0 = e0 % 32;
    const uint8_t* qs = blk + 48 + 32 * (sub / 2) + l0;
    const uint8_t* qh = blk + 16 + l0;
    const int shift = (sub & 1) ? 4 : 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int q = ((qs[j] >> shift) & 0xF) | (((qh[j] >> sub) & 1) << 4);
      w[j] = __fsub_rn(__fmul_rn(d1, static_cast<float>(q)), m1);
    }
  }
};

// Q2_K (84 B / 256): scales[16] @0 (per 16 elements: low nibble scale, high nibble min),
// qs[64] @16, d @80, dmin @82; element e = 128h + 32j + l has the code (qs[32h + l] >> 2j) & 3;
// value = (d * sc) * q - (dmin * m).
template <>
struct WeightDecoder<GgmlType::Q2_K> {
  static __device__ __forceinline__ void load8(const uint8_t* row, int64_t i0, int64_t,
                                               float w[8]) {
    const uint8_t* blk = row + (i0 / 256) * 84;
    const int e0 = static_cast<int>(i0 % 256);
    const uint8_t sm = blk[e0 / 16];  // 8 elements: one 16-element sub-block
    const float dl = __fmul_rn(ld_half(blk + 80), static_cast<float>(sm & 0xF));
    const float ml = __fmul_rn(ld_half(blk + 82), static_cast<float>(sm >> 4));
    const int h = e0 / 128, j2 = 2 * (e0 % 128 / 32), l0 = e0 % 32;
    const uint8_t* qs = blk + 16 + 32 * h + l0;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int q = (qs[j] >> j2) & 3;
      w[j] = __fsub_rn(__fmul_rn(dl, static_cast<float>(q)), ml);
    }
  }
};

// IQ4_XS (136 B / 256): d @0, scales_h u16 @2, scales_l[4] @4, qs[128] @8; 32-block k has the
// 6-bit scale ls = (scales_l[k / 2] >> 4 (k % 2)) & 15 | ((scales_h >> 2k) & 3) << 4 and its 16
// bytes at qs + 16k (nibbles as Q4_0); value = (d * (ls - 32)) * kIq4Values[q].
// kIq4Values[q] (kernels/quant_blocks.h) from two 64-bit constants, byte q % 8 of the low
// (q < 8) or high word, sign-extended: registers only, no local-memory table.
__device__ __forceinline__ int iq4_value(int q) {
  constexpr uint64_t kLo = 0xf6eaddcfbfad9881ull;  // -127, -104, -83, -65, -49, -35, -22, -10
  constexpr uint64_t kHi = 0x7159453526190d01ull;  // 1, 13, 25, 38, 53, 69, 89, 113
  const uint64_t word = q < 8 ? kLo : kHi;
  return static_cast<int8_t>(static_cast<uint8_t>(word >> (8 * (q & 7))));
}

template <>
struct WeightDecoder<GgmlType::IQ4_XS> {
  static __device__ __forceinline__ void load8(const uint8_t* row, int64_t i0, int64_t,
                                               float w[8]) {
    const uint8_t* blk = row + (i0 / 256) * 136;
    const int e0 = static_cast<int>(i0 % 256);
    const int k = e0 / 32, o = e0 % 32;
    const int scales_h = *reinterpret_cast<const unsigned short*>(blk + 2);
    const int ls = ((blk[4 + k / 2] >> (4 * (k % 2))) & 15) | (((scales_h >> (2 * k)) & 3) << 4);
    const float dl = __fmul_rn(ld_half(blk), static_cast<float>(ls - 32));
    const uint8_t* qs = blk + 8 + 16 * k + (o & 15);
    const int shift = o >= 16 ? 4 : 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      w[j] = __fmul_rn(dl, static_cast<float>(iq4_value((qs[j] >> shift) & 0xF)));
    }
  }
};

}  // namespace geist::cuda
