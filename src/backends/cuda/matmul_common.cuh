// Device helpers shared by the matmul kernels (matmul_cuda.cu: f32 and the bf16 path of F16,
// BF16, Q4_K, Q6_K; matmul_q8_cuda.cu and matmul_prefill_cuda.cu: the 8-bit path of Q8_0 and
// Q4_0). The arithmetic they fix is described at the top of matmul_cuda.cu (bf16 path) and
// matmul_q8_cuda.cu (8-bit path); every kernel that feeds an output element goes through these
// same helpers so that the element is bitwise the same whichever kernel computes it.
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
// q's 16 at 16q: chunk 2k's elements 4q..4q+3 and 16+4q..16+4q+3 (the k slots of lane quad q
// in an m16n8k32 fragment, I8Block below), then chunk 2k + 1's (an odd last chunk is padded
// with zeros); then the f16 scales [n_out][drow], chunk c of a row at c.
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

// ---- the 8-bit path (Q8_0, Q4_0; matmul_q8_cuda.cu states the arithmetic) ----

constexpr int32_t kQ8Fine = 254;  // simd::kQ8Fine: fine steps of the second activation plane

// Activation planes of weight type t (simd::q8_planes): Q8_0 two, Q4_0 one.
__host__ __device__ constexpr int q8_planes(GgmlType t) { return t == GgmlType::Q8_0 ? 2 : 1; }

// One 32-block's int8 codes in the order of the m16n8k32 fragments: word 2q + 0 holds elements
// 4q..4q+3 (byte j = element 4q + j) and word 2q + 1 elements 16+4q..16+4q+3, so that lane quad
// q reads its A (or B) registers of the block as one 8-byte load. The k order inside a block
// does not matter to an exact integer dot as long as weights and activations share it.
__host__ __device__ __forceinline__ int i8_slot(int e) {  // byte of element e (< 32)
  return 8 * ((e & 15) >> 2) + 4 * (e >> 4) + (e & 3);
}

// simd::quantize_row_q8_reference for one 32-block, bitwise (IEEE division and explicit
// round-to-nearest operations: no contraction of d * v into the subtraction), by an aligned
// group of 8 lanes (all 32 lanes of the warp take part in the shuffles): lane m of the group
// holds elements 4m..4m+3 (v) and gets their codes of plane p as the word c[p] (byte j: element
// 4m + j), which is word quant_word(m) of the block in I8 slot order; *dx the block's step.
// The block's max |x| is exact whatever order the lanes combine it in.
__host__ __device__ __forceinline__ int quant_word(int m) { return m < 4 ? 2 * m : 2 * m - 7; }

template <int P>
__device__ __forceinline__ void quant_group(const float (&v)[4], uint32_t (&c)[P], float* dx) {
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float a = fabsf(v[i]);
    amax = a > amax ? a : amax;
  }
#pragma unroll
  for (int off = 1; off < 8; off <<= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, amax, off);
    amax = o > amax ? o : amax;
  }
  const float d = __fdiv_rn(amax, 127.0f);
  const float df = __fdiv_rn(d, static_cast<float>(kQ8Fine));
  const float id = amax > 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
  const float idf = amax > 0.0f ? __fdiv_rn(1.0f, df) : 0.0f;
#pragma unroll
  for (int p = 0; p < P; ++p) c[p] = 0u;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float q1 = rintf(__fmul_rn(v[i], id));
    q1 = q1 > -127.0f ? q1 : -127.0f;
    q1 = q1 < 127.0f ? q1 : 127.0f;
    c[0] |= (static_cast<uint32_t>(__float2int_rn(q1)) & 0xFFu) << (8 * i);
    if constexpr (P == 2) {
      float q2 = rintf(__fmul_rn(__fsub_rn(v[i], __fmul_rn(d, q1)), idf));
      q2 = q2 > -127.0f ? q2 : -127.0f;
      q2 = q2 < 127.0f ? q2 : 127.0f;
      c[1] |= (static_cast<uint32_t>(__float2int_rn(q2)) & 0xFFu) << (8 * i);
    }
  }
  *dx = P == 2 ? df : d;
}

// The same codes by an aligned group of 4 lanes (all 32 lanes of the warp take part in the
// shuffles), in fewer operations: lane q of the group holds elements 4q..4q+3 (v[0..3]) and
// 16+4q..16+4q+3 (v[4..7]), slot words 2q and 2q + 1 of the block, and gets their codes of
// plane p as lo[p] and hi[p]. A product p is rounded as RN(p + kRound), which is
// kRound + rint(p) (ties to even) for |p| < 2^22 and lands beyond kRound +- 127 for larger |p|,
// so the clamps, made on those sums with the same comparisons (NaN and inf included), give the
// same integers as quant_group's rint-then-clamp; the code is then the low byte of the sum's
// bits, with no float -> int conversion (a quarter of the FP32 rate).
constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: its floats near it are spaced by 1

__device__ __forceinline__ float round_clamp127(float p) {
  float t = __fadd_rn(p, kRound);
  t = t > kRound - 127.0f ? t : kRound - 127.0f;
  return t < kRound + 127.0f ? t : kRound + 127.0f;
}

template <int P>
__device__ __forceinline__ float quant_quad(const float (&v)[8], uint32_t (&lo)[P],
                                            uint32_t (&hi)[P]) {
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float a = fabsf(v[i]);
    amax = a > amax ? a : amax;
  }
#pragma unroll
  for (int off = 1; off < 4; off <<= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, amax, off);
    amax = o > amax ? o : amax;
  }
  const float d = __fdiv_rn(amax, 127.0f);
  const float df = __fdiv_rn(d, static_cast<float>(kQ8Fine));
  const float id = amax > 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
  const float idf = amax > 0.0f ? __fdiv_rn(1.0f, df) : 0.0f;
#pragma unroll
  for (int p = 0; p < P; ++p) lo[p] = hi[p] = 0u;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float t1 = round_clamp127(__fmul_rn(v[i], id));
    uint32_t c[P];
    c[0] = __float_as_uint(t1) & 0xFFu;
    if constexpr (P == 2) {
      const float q1 = __fsub_rn(t1, kRound);  // exact
      const float t2 = round_clamp127(__fmul_rn(__fsub_rn(v[i], __fmul_rn(d, q1)), idf));
      c[P - 1] = __float_as_uint(t2) & 0xFFu;
    }
#pragma unroll
    for (int p = 0; p < P; ++p) {
      if (i < 4) {
        lo[p] |= c[p] << (8 * i);
      } else {
        hi[p] |= c[p] << (8 * (i - 4));
      }
    }
  }
  return P == 2 ? df : d;
}

// Elements [i0, i0 + 4) of token t as floats (zeros for t >= n_tok or when !ok); vec: 16-byte
// aligned rows.
__device__ __forceinline__ void x_load4(const float* __restrict__ x, int64_t x_stride,
                                        int32_t n_tok, bool vec, bool ok, int64_t t, int64_t i0,
                                        float (&v)[4]) {
  if (!ok || t >= n_tok) {
    v[0] = v[1] = v[2] = v[3] = 0.0f;
    return;
  }
  const float* p = x + t * x_stride + i0;
  if (vec) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(p));
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = __ldg(p + i);
  }
}

// c += A (16x32, row) * B (32x8, col), int8 inputs, exact int32 accumulation. Not volatile: the
// independent products of a block may be interleaved (each one's operands fix its value).
__device__ __forceinline__ void mma_s8(int32_t (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                       uint32_t a3, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// d = c + A (16x32, row) * B (32x8, col) with c = (m, m, m, m): the accumulator's start is an
// input, so one register quad holding m feeds every product (with mma_s8 each product's
// accumulator is first set to m, four moves per product).
__device__ __forceinline__ void mma_s8_from(int32_t (&d)[4], int32_t m, uint32_t a0, uint32_t a1,
                                            uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%10,%10,%10,%10};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(m));
}

// One block pair (chunks 2k, 2k + 1) of weight row r: codes() lane quad q's codes in I8 slot
// order (x, y: chunk 2k's words 2q, 2q + 1; z, w: chunk 2k + 1's), scales() the two f16 scales
// (chunk 2k in the low half). A chunk past the row (odd chunk count) or a row past n_out reads
// as zeros.
template <GgmlType T>
struct PairLoader;

template <>
struct PairLoader<GgmlType::Q8_0> {
  static __device__ __forceinline__ uint4 codes(const DevW& w, int64_t r, int64_t k, int q) {
    if (r >= w.n_out) return make_uint4(0u, 0u, 0u, 0u);
    return __ldg(reinterpret_cast<const uint4*>(w.data + r * w.qrow + 64 * k + 16 * q));
  }
  static __device__ __forceinline__ uint32_t scales(const DevW& w, int64_t r, int64_t k) {
    if (r >= w.n_out) return 0u;
    return __ldg(reinterpret_cast<const uint32_t*>(w.scales + r * w.drow + 2 * k));
  }
};

// Q4_0 (GGUF rows, 18-byte blocks, 2-byte aligned): lane quad q's elements 4q..4q+3 are the
// low nibbles of qs[4q..4q+3] and 16+4q..16+4q+3 their high nibbles; codes u - 8.
template <>
struct PairLoader<GgmlType::Q4_0> {
  static __device__ __forceinline__ uint4 codes(const DevW& w, int64_t r, int64_t k, int q) {
    uint32_t c[4] = {0u, 0u, 0u, 0u};
    if (r < w.n_out) {
      const uint8_t* row = w.data + static_cast<size_t>(r) * w.row_bytes;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t b = 2 * k + h;
        if (b < w.n_in / 32) {
          const unsigned short* p = reinterpret_cast<const unsigned short*>(row + b * 18);
          const uint32_t u = static_cast<uint32_t>(__ldg(p + 1 + 2 * q)) |
                             (static_cast<uint32_t>(__ldg(p + 2 + 2 * q)) << 16);
          c[2 * h] = __vsub4(u & 0x0F0F0F0Fu, 0x08080808u);
          c[2 * h + 1] = __vsub4((u >> 4) & 0x0F0F0F0Fu, 0x08080808u);
        }
      }
    }
    return make_uint4(c[0], c[1], c[2], c[3]);
  }
  static __device__ __forceinline__ uint32_t scales(const DevW& w, int64_t r, int64_t k) {
    uint32_t d = 0u;
    if (r < w.n_out) {
      const uint8_t* row = w.data + static_cast<size_t>(r) * w.row_bytes;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t b = 2 * k + h;
        if (b < w.n_in / 32) {
          d |= static_cast<uint32_t>(__ldg(reinterpret_cast<const unsigned short*>(row + b * 18)))
               << (16 * h);
        }
      }
    }
    return d;
  }
};

// float(isum_b) without the int -> float conversion unit (a quarter of the FP32 rate on
// sm_90, and the prefill kernel's bound): a plane's dot |d| <= 32 * 127 * 127 < 2^22 is
// accumulated by the mma onto kMagicBits, the bits of kRound = 1.5 * 2^23, whose float then
// holds kRound + d exactly, so float(d) = that - kRound exactly; two planes give
// float(kQ8Fine * d1 + d2) = fma(kQ8Fine, float(d1), float(d2)), one rounding of the exact
// integer: bitwise __int2float_rn(isum_b).
constexpr int32_t kMagicBits = 0x4B400000;  // __float_as_int(kRound)
__device__ __forceinline__ float magic_to_float(int32_t c) {
  return __fsub_rn(__int_as_float(c), kRound);
}

// The product of one block for a 16 x 8 tile: the exact isum (two planes: kQ8Fine * dot(w, q1)
// + dot(w, q2), one product per plane from kMagicBits, combined as above), then
// acc = fma(float(isum), dw * dx, acc) per element. a: the mma's A quad of the block (rows g,
// g + 8 of words 2q, then of words 2q + 1); b[p]: token g's words of plane p.
template <int P>
__device__ __forceinline__ void block_fma(const uint4& a, const uint2 (&b)[P], float dw0, float dw1,
                                          float dx0, float dx1, float (&acc)[4]) {
  int32_t c[P][4];
#pragma unroll
  for (int p = 0; p < P; ++p) mma_s8_from(c[p], kMagicBits, a.x, a.y, a.z, a.w, b[p].x, b[p].y);
  float f[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    f[e] = magic_to_float(c[0][e]);
    if constexpr (P == 2) {
      f[e] = __fmaf_rn(static_cast<float>(kQ8Fine), f[e], magic_to_float(c[P - 1][e]));
    }
  }
  acc[0] = __fmaf_rn(f[0], __fmul_rn(dw0, dx0), acc[0]);
  acc[1] = __fmaf_rn(f[1], __fmul_rn(dw0, dx1), acc[1]);
  acc[2] = __fmaf_rn(f[2], __fmul_rn(dw1, dx0), acc[2]);
  acc[3] = __fmaf_rn(f[3], __fmul_rn(dw1, dx1), acc[3]);
}

}  // namespace geist::cuda::mm
