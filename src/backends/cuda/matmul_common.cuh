// Device helpers shared by the matmul kernels (matmul_cuda.cu: f32, decode and the generic
// prefill; matmul_prefill_cuda.cu: the tiled prefill of the integer-times-scale types). The
// arithmetic they fix (k-slot mapping, parts, hi/lo splits) is described at the top of
// matmul_cuda.cu; every kernel that feeds an output element must go through these same helpers
// so that the element is bitwise the same whichever kernel computes it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/cuda_quant.cuh"
#include "kernels/matmul.h"

namespace geist::cuda::mm {

constexpr int kMaxParts = 16;

// Parts of the k range: a function of n_in only (see the header comment). Parts start at
// even chunks, so a part never splits a pair of the repacked Q8_0 rows.
__host__ __device__ __forceinline__ int num_parts(int64_t n_chunks) {
  const int64_t p = n_chunks / 2;
  return static_cast<int>(p < 1 ? 1 : (p > kMaxParts ? kMaxParts : p));
}
__host__ __device__ __forceinline__ int64_t part_begin(int64_t n_chunks, int parts, int p) {
  const int64_t c = 2 * (((n_chunks + 1) / 2) * p / parts);
  return c < n_chunks ? c : n_chunks;
}

// A weight as the kernels read it. Q8_0 device copies are repacked (repack_q8_0_kernel):
// quants [n_out][qrow] where pair k of 32-element chunks (2k, 2k + 1) is 64 bytes, lane quad
// q's 16 at 16q: chunk 2k's elements 8q..8q+7, then chunk 2k + 1's (an odd last chunk is
// padded with zeros); then the f16 scales [n_out][drow], chunk c of a row at c.
struct DevW {
  const uint8_t* data;
  size_t row_bytes;  // other types: the GGUF row
  int64_t n_in;
  int64_t n_out;
  int64_t qrow;  // Q8_0: 64 * pairs
  int64_t drow;  // Q8_0: 2 * pairs
  const uint16_t* scales;
};

__host__ __device__ __forceinline__ int64_t q8_pairs(int64_t n_in) { return (n_in / 32 + 1) / 2; }

inline DevW dev_w(const WeightMatrix& w) {
  DevW d{w.data, w.row_bytes, w.n_in, w.n_out, 0, 0, nullptr};
  if (w.type == GgmlType::Q8_0) {
    d.qrow = 64 * q8_pairs(w.n_in);
    d.drow = 2 * q8_pairs(w.n_in);
    d.scales = reinterpret_cast<const uint16_t*>(w.data + d.qrow * w.n_out);
  }
  return d;
}

// Two floats as bf16x2 hi and lo words (first value in the low half, the lower k slot).
__device__ __forceinline__ void split2(float a, float b, uint32_t* hi, uint32_t* lo) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  const float2 hf = __bfloat1622float2(h);
  const __nv_bfloat162 l = __floats2bfloat162_rn(__fsub_rn(a, hf.x), __fsub_rn(b, hf.y));
  *hi = *reinterpret_cast<const uint32_t*>(&h);
  *lo = *reinterpret_cast<const uint32_t*>(&l);
}

// Two int8 quants (the low bytes of t's 16-bit halves) as bf16x2, exactly and without a
// conversion unit: (128 + (q & 127)) + (-128 or -256 by the sign bit) is the integer q, and
// a bf16 add of two bf16 values whose sum is representable is exact (q = 0 gives +0, as the
// float conversion did).
__device__ __forceinline__ uint32_t i8x2_bf16(uint32_t t) {
  const uint32_t a = (t & 0x007F007Fu) | 0x43004300u;
  const uint32_t s = (t & 0x00800080u) | 0xC300C300u;
  const __nv_bfloat162 r = __hadd2(*reinterpret_cast<const __nv_bfloat162*>(&a),
                                   *reinterpret_cast<const __nv_bfloat162*>(&s));
  return *reinterpret_cast<const uint32_t*>(&r);
}
// Eight int8 quants (v.x bytes 0..3, v.y bytes 0..3) as four bf16x2 words, word j = 2j, 2j+1.
__device__ __forceinline__ void i8x8_bf16(uint32_t lo, uint32_t hi, uint32_t q[4]) {
  q[0] = i8x2_bf16(__byte_perm(lo, 0u, 0x4140));
  q[1] = i8x2_bf16(__byte_perm(lo, 0u, 0x4342));
  q[2] = i8x2_bf16(__byte_perm(hi, 0u, 0x4140));
  q[3] = i8x2_bf16(__byte_perm(hi, 0u, 0x4342));
}

__device__ __forceinline__ float f16_bits(uint32_t b) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(b)));
}

// d += A (16x16, row) * B (16x8, col), bf16 inputs, f32 accumulators.
__device__ __forceinline__ void mma_bf16(float d[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Q8_0 and Q4_0 weights are an integer q (exact in bf16) times the 32-block's scale d: their
// chunk product is D = q.x_hi + q.x_lo by mma (from +0, step 0 then 1), then acc += d * D
// (one FMA). Exact weights and a third fewer mma than the generic split.
template <GgmlType T>
struct ScaledInt {
  static constexpr bool kOn = false;
};
template <>
struct ScaledInt<GgmlType::Q8_0> {
  static constexpr bool kOn = true;
  // Lane quad q's 8 quants of chunk c of row r (< n_out) as bf16x2 words; *d the scale.
  static __device__ __forceinline__ void load(const DevW& w, int64_t r, int64_t c, int q,
                                              uint32_t aq[4], float* d) {
    const uint2 v = __ldg(
        reinterpret_cast<const uint2*>(w.data + r * w.qrow + 64 * (c >> 1) + 16 * q + 8 * (c & 1)));
    i8x8_bf16(v.x, v.y, aq);
    *d = f16_bits(__ldg(w.scales + r * w.drow + c));
  }
};
template <>
struct ScaledInt<GgmlType::Q4_0> {
  static constexpr bool kOn = true;
  static __device__ __forceinline__ void load(const DevW& w, int64_t r, int64_t c, int q,
                                              uint32_t aq[4], float* d) {
    const uint8_t* blk = w.data + static_cast<size_t>(r) * w.row_bytes + c * 18;
    const int o = 8 * q;  // 0, 8, 16 or 24: one nibble half
    const unsigned short* qs = reinterpret_cast<const unsigned short*>(blk + 2 + (o & 15));
    const int shift = o >= 16 ? 4 : 0;
    *d = ld_half(blk);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const unsigned short u = qs[j];
      const __nv_bfloat162 h =
          __floats2bfloat162_rn(static_cast<float>(((u >> shift) & 0xF) - 8),
                                static_cast<float>(((u >> (8 + shift)) & 0xF) - 8));
      aq[j] = *reinterpret_cast<const uint32_t*>(&h);
    }
  }
};

// One chunk's contribution for one m-tile: D = the mma chain (from +0) over the two k16
// steps, hi then lo activations; then acc += d * D (ScaledInt types).
__device__ __forceinline__ void scaled_chunk(const uint32_t a[2][4], const float dw[2],
                                             const uint32_t bh[4], const uint32_t bl[4],
                                             float acc[4]) {
  float d4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const int k = 2 * s;
    mma_bf16(d4, a[0][k], a[1][k], a[0][k + 1], a[1][k + 1], bh[k], bh[k + 1]);
    mma_bf16(d4, a[0][k], a[1][k], a[0][k + 1], a[1][k + 1], bl[k], bl[k + 1]);
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) acc[e] = __fmaf_rn(dw[e >> 1], d4[e], acc[e]);
}

// Token t's activations [i0, i0 + 8) as f32; zero past n_in or for t >= n_tok.
// vec: the rows are 16-byte aligned, so whole chunks load as two float4.
__device__ __forceinline__ void x_load8(const float* __restrict__ x, int64_t x_stride,
                                        int32_t n_tok, int64_t n_in, bool vec, int64_t t,
                                        int64_t i0, float v[8]) {
  if (t < n_tok) {
    const float* p = x + t * x_stride + i0;
    if (vec && i0 + 8 <= n_in) {
      const float4 a = __ldg(reinterpret_cast<const float4*>(p));
      const float4 b = __ldg(reinterpret_cast<const float4*>(p + 4));
      v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
      v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = i0 + j < n_in ? __ldg(p + j) : 0.0f;
    }
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = 0.0f;
  }
}

// Eight values as hi/lo words: word j holds elements 2j, 2j + 1.
__device__ __forceinline__ void split8(const float v[8], uint32_t hi[4], uint32_t lo[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) split2(v[2 * j], v[2 * j + 1], &hi[j], &lo[j]);
}

// x_load8 then split8: token t's activations [i0, i0 + 8) as hi/lo words.
__device__ __forceinline__ void load_x(const float* __restrict__ x, int64_t x_stride, int32_t n_tok,
                                       int64_t n_in, bool vec, int64_t t, int64_t i0,
                                       uint32_t hi[4], uint32_t lo[4]) {
  float v[8];
  x_load8(x, x_stride, n_tok, n_in, vec, t, i0, v);
  split8(v, hi, lo);
}

}  // namespace geist::cuda::mm
