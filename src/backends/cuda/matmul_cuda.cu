// Weight matrix kernels: matmul (dequantize inside the kernel) and get_rows.
//
// F32 weights keep the exact f32 path (one warp per output row, FMAs in a fixed order).
// Every other type runs on the tensor cores: mma.sync m16n8k16 with bf16 inputs and f32
// accumulation. A weight w (decoded to f32 bitwise as dequantize_row() does) and an
// activation x are each split into two bf16 terms, hi = bf16(v) and lo = bf16(v - hi), and
// the product is w_hi x_hi + w_hi x_lo + w_lo x_hi (three mma per k16 step): about 16
// significant bits per factor, far more than llama.cpp's f16 or 8-bit activations, and no
// overflow (bf16 has f32's exponent range).
//
// Determinism (cuda_kernels.h): an output element's arithmetic is fixed by n_in alone.
//   - k runs over 32-element chunks; inside chunk c, lane quad q (lane & 3) feeds elements
//     [32c + 8q, 32c + 8q + 8) to step s = 0, 1 as the k-slots {2q, 2q + 1} <- 8q + 4s + {0, 1}
//     and {2q + 8, 2q + 9} <- 8q + 4s + {2, 3}, for the weights and the activations alike;
//   - the chunks form num_parts(n_chunks) contiguous parts; a part's sum starts at +0 and
//     takes the mma chain (hi.hi, hi.lo, lo.hi) for step 0 then step 1 of every chunk in order
//     (Q8_0 / Q4_0: the exact-integer form of ScaledInt below);
//   - the element is part 0's sum, then + part 1's, + part 2's, ... (round to nearest).
// A tensor-core product of an output element depends only on its row of A, its column of B
// and its accumulator, so padding tokens (zero columns) and the other tokens of the tile do
// not change it. The decode kernel (n_tok <= 8) computes the parts on different warps and
// folds them through shared memory; the prefill kernel walks the parts in one warp. Both give
// every element bitwise the same value (MatmulRowsAreBitwiseIndependentOfBatchSize).
#include <cuda_bf16.h>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_quant.cuh"

namespace geist::cuda {

namespace {

constexpr int kMaxGridY = 65535;

// ---- f32 weights: the exact FMA path ----

constexpr int kWarps = 8;    // output rows per block
constexpr int kChunk = 256;  // activations per step: 8 per lane

template <int NT>
__global__ void __launch_bounds__(kWarps * 32)
    matmul_f32_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t n_in, int64_t n_out,
                      const float* __restrict__ x, int64_t x_stride, int32_t n_tok,
                      float* __restrict__ y, int64_t y_stride) {
  __shared__ __align__(16) float xs[NT][kChunk];  // [token][element of the chunk]
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * NT;
  const bool active = o < n_out;
  const uint8_t* row = w + static_cast<size_t>(active ? o : 0) * row_bytes;
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;

  for (int64_t k0 = 0; k0 < n_in; k0 += kChunk) {
    __syncthreads();  // the previous chunk's readers are done
    for (int idx = threadIdx.x; idx < NT * kChunk; idx += blockDim.x) {
      const int t = idx / kChunk;
      const int i = idx % kChunk;
      float v = 0.0f;  // padding: zero weights meet zero activations
      if (t0 + t < n_tok && k0 + i < n_in) v = x[(t0 + t) * x_stride + k0 + i];
      xs[t][i] = v;
    }
    __syncthreads();
    const int64_t i0 = k0 + lane * 8;
    if (active && i0 < n_in) {
      float wv[8];
      WeightDecoder<GgmlType::F32>::load8(row, i0, n_in, wv);
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const float4 a = *reinterpret_cast<const float4*>(&xs[t][lane * 8]);
        const float4 b = *reinterpret_cast<const float4*>(&xs[t][lane * 8 + 4]);
        float s = acc[t];
        s = __fmaf_rn(wv[0], a.x, s);
        s = __fmaf_rn(wv[1], a.y, s);
        s = __fmaf_rn(wv[2], a.z, s);
        s = __fmaf_rn(wv[3], a.w, s);
        s = __fmaf_rn(wv[4], b.x, s);
        s = __fmaf_rn(wv[5], b.y, s);
        s = __fmaf_rn(wv[6], b.z, s);
        s = __fmaf_rn(wv[7], b.w, s);
        acc[t] = s;
      }
    }
  }
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    float s = acc[t];
    for (int off = 16; off > 0; off >>= 1) s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, off));
    acc[t] = s;
  }
  if (active && lane == 0) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t0 + t < n_tok) y[(t0 + t) * y_stride + o] = acc[t];
    }
  }
}

template <int NT>
cudaError_t launch_f32_nt(cudaStream_t s, const WeightMatrix& w, const float* x, int64_t x_stride,
                          int32_t n_tok, float* y, int64_t y_stride) {
  const int64_t blocks_x = (w.n_out + kWarps - 1) / kWarps;
  if (blocks_x > 0x7fffffff) return cudaErrorInvalidConfiguration;
  // Grid y is capped at 65535 tiles: longer batches go in several launches.
  const int64_t per_launch = static_cast<int64_t>(kMaxGridY) * NT;
  for (int64_t t = 0; t < n_tok; t += per_launch) {
    const int64_t nt = n_tok - t < per_launch ? n_tok - t : per_launch;
    const dim3 grid(static_cast<unsigned>(blocks_x), static_cast<unsigned>((nt + NT - 1) / NT));
    matmul_f32_kernel<NT><<<grid, kWarps * 32, 0, s>>>(
        w.data, w.row_bytes, w.n_in, w.n_out, x + t * x_stride, x_stride, static_cast<int32_t>(nt),
        y + t * y_stride, y_stride);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t launch_f32(cudaStream_t s, const WeightMatrix& w, const float* x, int64_t x_stride,
                       int32_t n_tok, float* y, int64_t y_stride) {
  if (n_tok == 1) return launch_f32_nt<1>(s, w, x, x_stride, n_tok, y, y_stride);
  if (n_tok <= 4) return launch_f32_nt<4>(s, w, x, x_stride, n_tok, y, y_stride);
  return launch_f32_nt<16>(s, w, x, x_stride, n_tok, y, y_stride);
}

// ---- tensor-core path ----

constexpr int kMaxParts = 16;
constexpr int kDecWarps = 16;  // decode block: 16 rows, one warp per k part
constexpr int kPreMR = 2;      // prefill warp tile: 2 x 16 rows ...
constexpr int kPreNR = 4;      // ... by 4 x 8 tokens
constexpr int kPreWarps = 4;   // prefill block: 32 rows x 128 tokens, warps along tokens

// Parts of the k range: a function of n_in only (see the header comment).
__host__ __device__ __forceinline__ int num_parts(int64_t n_chunks) {
  const int64_t p = n_chunks / 2;
  return static_cast<int>(p < 1 ? 1 : (p > kMaxParts ? kMaxParts : p));
}
__host__ __device__ __forceinline__ int64_t part_begin(int64_t n_chunks, int parts, int p) {
  return n_chunks * p / parts;
}

// Two floats as bf16x2 hi and lo words (first value in the low half, the lower k slot).
__device__ __forceinline__ void split2(float a, float b, uint32_t* hi, uint32_t* lo) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  const float2 hf = __bfloat1622float2(h);
  const __nv_bfloat162 l = __floats2bfloat162_rn(__fsub_rn(a, hf.x), __fsub_rn(b, hf.y));
  *hi = *reinterpret_cast<const uint32_t*>(&h);
  *lo = *reinterpret_cast<const uint32_t*>(&l);
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

// One row's 8 elements of a chunk for this lane, as hi/lo words: word j holds elements
// 2j, 2j + 1 (word 2s + p is step s's k-slot pair p). Rows past n_out are zero.
template <GgmlType T>
__device__ __forceinline__ void load_w(const uint8_t* __restrict__ w, size_t row_bytes,
                                       int64_t n_in, int64_t n_out, int64_t r, int64_t i0,
                                       uint32_t hi[4], uint32_t lo[4]) {
  float v[8];
  if (r < n_out) {
    WeightDecoder<T>::load8(w + static_cast<size_t>(r) * row_bytes, i0, n_in, v);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = 0.0f;
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) split2(v[2 * j], v[2 * j + 1], &hi[j], &lo[j]);
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
  // The 8 quants [i0, i0 + 8) of row `row` as bf16x2 words; *d its block scale.
  static __device__ __forceinline__ void load(const uint8_t* row, int64_t i0, uint32_t q[4],
                                              float* d) {
    const uint8_t* blk = row + (i0 / 32) * 34;
    const unsigned short* qs = reinterpret_cast<const unsigned short*>(blk + 2 + i0 % 32);
    *d = ld_half(blk);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const unsigned short u = qs[j];  // rows and blocks are 2-byte aligned only
      const __nv_bfloat162 h =
          __floats2bfloat162_rn(static_cast<float>(static_cast<int8_t>(u & 0xFF)),
                                static_cast<float>(static_cast<int8_t>(u >> 8)));
      q[j] = *reinterpret_cast<const uint32_t*>(&h);
    }
  }
};
template <>
struct ScaledInt<GgmlType::Q4_0> {
  static constexpr bool kOn = true;
  static __device__ __forceinline__ void load(const uint8_t* row, int64_t i0, uint32_t q[4],
                                              float* d) {
    const uint8_t* blk = row + (i0 / 32) * 18;
    const int o = static_cast<int>(i0 % 32);  // 0, 8, 16 or 24: one nibble half
    const unsigned short* qs = reinterpret_cast<const unsigned short*>(blk + 2 + (o & 15));
    const int shift = o >= 16 ? 4 : 0;
    *d = ld_half(blk);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const unsigned short u = qs[j];
      const __nv_bfloat162 h =
          __floats2bfloat162_rn(static_cast<float>(((u >> shift) & 0xF) - 8),
                                static_cast<float>(((u >> (8 + shift)) & 0xF) - 8));
      q[j] = *reinterpret_cast<const uint32_t*>(&h);
    }
  }
};

// Token t's activations [i0, i0 + 8) as hi/lo words; zero past n_in or for t >= n_tok.
// vec: the rows are 16-byte aligned, so whole chunks load as two float4.
__device__ __forceinline__ void load_x(const float* __restrict__ x, int64_t x_stride, int32_t n_tok,
                                       int64_t n_in, bool vec, int64_t t, int64_t i0,
                                       uint32_t hi[4], uint32_t lo[4]) {
  float v[8];
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
#pragma unroll
  for (int j = 0; j < 4; ++j) split2(v[2 * j], v[2 * j + 1], &hi[j], &lo[j]);
}

// acc[i][j] = the sum of chunks [c0, c1) (from +0) for m-tile i (rows r0 + 16 i ...) and
// n-tile j (tokens t0 + 8 j ...), accumulator layout of mma m16n8.
template <GgmlType T, int MR, int NR>
__device__ __forceinline__ void part_sum(const uint8_t* __restrict__ w, size_t row_bytes,
                                         int64_t n_in, int64_t n_out, int64_t r0,
                                         const float* __restrict__ x, int64_t x_stride,
                                         int32_t n_tok, bool vec, int64_t t0, int64_t c0,
                                         int64_t c1, float acc[MR][NR][4]) {
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2;
  const int q = lane & 3;
#pragma unroll
  for (int i = 0; i < MR; ++i) {
#pragma unroll
    for (int j = 0; j < NR; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
    }
  }
#pragma unroll 2
  for (int64_t c = c0; c < c1; ++c) {
    const int64_t i0 = c * 32 + 8 * q;
    if constexpr (ScaledInt<T>::kOn) {
      uint32_t aq[MR][2][4];  // [m-tile][row g / g + 8][word]
      float dw[MR][2];
#pragma unroll
      for (int i = 0; i < MR; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t r = r0 + 16 * i + g + 8 * h;
          if (r < n_out) {
            ScaledInt<T>::load(w + static_cast<size_t>(r) * row_bytes, i0, aq[i][h], &dw[i][h]);
          } else {
            dw[i][h] = 0.0f;
#pragma unroll
            for (int k = 0; k < 4; ++k) aq[i][h][k] = 0u;
          }
        }
      }
#pragma unroll
      for (int j = 0; j < NR; ++j) {
        uint32_t bh[4], bl[4];
        load_x(x, x_stride, n_tok, n_in, vec, t0 + 8 * j + g, i0, bh, bl);
#pragma unroll
        for (int i = 0; i < MR; ++i) {
          float d4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
          for (int s = 0; s < 2; ++s) {
            const int k = 2 * s;
            mma_bf16(d4, aq[i][0][k], aq[i][1][k], aq[i][0][k + 1], aq[i][1][k + 1], bh[k],
                     bh[k + 1]);
            mma_bf16(d4, aq[i][0][k], aq[i][1][k], aq[i][0][k + 1], aq[i][1][k + 1], bl[k],
                     bl[k + 1]);
          }
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            acc[i][j][e] = __fmaf_rn(dw[i][e >> 1], d4[e], acc[i][j][e]);
          }
        }
      }
    } else {
      uint32_t ah[MR][2][4], al[MR][2][4];  // [m-tile][row g / g + 8][word]
#pragma unroll
      for (int i = 0; i < MR; ++i) {
        load_w<T>(w, row_bytes, n_in, n_out, r0 + 16 * i + g, i0, ah[i][0], al[i][0]);
        load_w<T>(w, row_bytes, n_in, n_out, r0 + 16 * i + g + 8, i0, ah[i][1], al[i][1]);
      }
#pragma unroll
      for (int j = 0; j < NR; ++j) {
        uint32_t bh[4], bl[4];
        load_x(x, x_stride, n_tok, n_in, vec, t0 + 8 * j + g, i0, bh, bl);
#pragma unroll
        for (int i = 0; i < MR; ++i) {
#pragma unroll
          for (int s = 0; s < 2; ++s) {
            const int k = 2 * s;
            mma_bf16(acc[i][j], ah[i][0][k], ah[i][1][k], ah[i][0][k + 1], ah[i][1][k + 1], bh[k],
                     bh[k + 1]);
            mma_bf16(acc[i][j], ah[i][0][k], ah[i][1][k], ah[i][0][k + 1], ah[i][1][k + 1], bl[k],
                     bl[k + 1]);
            mma_bf16(acc[i][j], al[i][0][k], al[i][1][k], al[i][0][k + 1], al[i][1][k + 1], bh[k],
                     bh[k + 1]);
          }
        }
      }
    }
  }
}

// n_tok <= 8: block = 16 rows x 8 tokens; warp wp computes parts wp, wp + kDecWarps, ...
template <GgmlType T>
__global__ void __launch_bounds__(kDecWarps * 32)
    mma_decode_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t n_in, int64_t n_out,
                      const float* __restrict__ x, int64_t x_stride, int32_t n_tok, bool vec,
                      float* __restrict__ y, int64_t y_stride) {
  __shared__ float part[kMaxParts][16][8];  // [part][row of the block][token]
  const int lane = threadIdx.x & 31;
  const int wp = threadIdx.x >> 5;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * 16;
  const int64_t n_chunks = (n_in + 31) / 32;
  const int parts = num_parts(n_chunks);
  for (int p = wp; p < parts; p += kDecWarps) {
    float acc[1][1][4];
    part_sum<T, 1, 1>(w, row_bytes, n_in, n_out, r0, x, x_stride, n_tok, vec, 0,
                      part_begin(n_chunks, parts, p), part_begin(n_chunks, parts, p + 1), acc);
    const int g = lane >> 2, q = lane & 3;
    part[p][g][2 * q] = acc[0][0][0];
    part[p][g][2 * q + 1] = acc[0][0][1];
    part[p][g + 8][2 * q] = acc[0][0][2];
    part[p][g + 8][2 * q + 1] = acc[0][0][3];
  }
  __syncthreads();
  if (threadIdx.x < 128) {
    const int rr = threadIdx.x >> 3;
    const int t = threadIdx.x & 7;
    float total = part[0][rr][t];
    for (int p = 1; p < parts; ++p) total = __fadd_rn(total, part[p][rr][t]);
    if (t < n_tok && r0 + rr < n_out) y[t * y_stride + r0 + rr] = total;
  }
}

// n_tok > 8: block = 32 rows x 128 tokens, each warp 32 rows x 32 tokens, parts in order.
template <GgmlType T>
__global__ void __launch_bounds__(kPreWarps * 32)
    mma_prefill_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t n_in, int64_t n_out,
                       const float* __restrict__ x, int64_t x_stride, int32_t n_tok, bool vec,
                       float* __restrict__ y, int64_t y_stride) {
  const int lane = threadIdx.x & 31;
  const int wp = threadIdx.x >> 5;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * (16 * kPreMR);
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * (kPreWarps * 8 * kPreNR) +
                     static_cast<int64_t>(wp) * (8 * kPreNR);
  if (t0 >= n_tok) return;
  const int64_t n_chunks = (n_in + 31) / 32;
  const int parts = num_parts(n_chunks);
  float total[kPreMR][kPreNR][4];
  for (int p = 0; p < parts; ++p) {
    float acc[kPreMR][kPreNR][4];
    part_sum<T, kPreMR, kPreNR>(w, row_bytes, n_in, n_out, r0, x, x_stride, n_tok, vec, t0,
                                part_begin(n_chunks, parts, p), part_begin(n_chunks, parts, p + 1),
                                acc);
#pragma unroll
    for (int i = 0; i < kPreMR; ++i) {
#pragma unroll
      for (int j = 0; j < kPreNR; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          total[i][j][e] = p == 0 ? acc[i][j][e] : __fadd_rn(total[i][j][e], acc[i][j][e]);
        }
      }
    }
  }
  const int g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int i = 0; i < kPreMR; ++i) {
#pragma unroll
    for (int j = 0; j < kPreNR; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t r = r0 + 16 * i + g + (e >= 2 ? 8 : 0);
        const int64_t t = t0 + 8 * j + 2 * q + (e & 1);
        if (r < n_out && t < n_tok) y[t * y_stride + r] = total[i][j][e];
      }
    }
  }
}

template <GgmlType T>
cudaError_t launch_mma(cudaStream_t s, const WeightMatrix& w, const float* x, int64_t x_stride,
                       int32_t n_tok, float* y, int64_t y_stride) {
  const bool vec = x_stride % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
  if (n_tok <= 8) {
    const int64_t blocks = (w.n_out + 15) / 16;
    if (blocks > 0x7fffffff) return cudaErrorInvalidConfiguration;
    mma_decode_kernel<T><<<static_cast<unsigned>(blocks), kDecWarps * 32, 0, s>>>(
        w.data, w.row_bytes, w.n_in, w.n_out, x, x_stride, n_tok, vec, y, y_stride);
    return cudaGetLastError();
  }
  const int64_t rows_per_block = 16 * kPreMR;
  const int64_t toks_per_block = kPreWarps * 8 * kPreNR;
  const int64_t blocks_x = (w.n_out + rows_per_block - 1) / rows_per_block;
  if (blocks_x > 0x7fffffff) return cudaErrorInvalidConfiguration;
  const int64_t per_launch = static_cast<int64_t>(kMaxGridY) * toks_per_block;
  for (int64_t t = 0; t < n_tok; t += per_launch) {
    const int64_t nt = n_tok - t < per_launch ? n_tok - t : per_launch;
    const dim3 grid(static_cast<unsigned>(blocks_x),
                    static_cast<unsigned>((nt + toks_per_block - 1) / toks_per_block));
    // Later launches start at a token offset: keep the float4 path only if it stays aligned.
    mma_prefill_kernel<T><<<grid, kPreWarps * 32, 0, s>>>(
        w.data, w.row_bytes, w.n_in, w.n_out, x + t * x_stride, x_stride, static_cast<int32_t>(nt),
        vec, y + t * y_stride, y_stride);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

template <GgmlType T>
__global__ void get_rows_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t n_in,
                                const int32_t* __restrict__ ids, float* __restrict__ out) {
  const int64_t t = blockIdx.x;
  const uint8_t* row = w + static_cast<size_t>(ids[t]) * row_bytes;
  float* dst = out + t * n_in;  // [n][n_in]
  for (int64_t i0 = static_cast<int64_t>(threadIdx.x) * 8; i0 < n_in;
       i0 += static_cast<int64_t>(blockDim.x) * 8) {
    float wv[8];
    WeightDecoder<T>::load8(row, i0, n_in, wv);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (i0 + j < n_in) dst[i0 + j] = wv[j];
    }
  }
}

template <GgmlType T>
cudaError_t launch_get_rows_t(cudaStream_t s, const WeightMatrix& w, const int32_t* ids, int32_t n,
                              float* out) {
  get_rows_kernel<T><<<n, 128, 0, s>>>(w.data, w.row_bytes, w.n_in, ids, out);
  return cudaGetLastError();
}

}  // namespace

bool weight_type_supported(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q4_K:
    case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

cudaError_t matmul(cudaStream_t s, const WeightMatrix& w, const float* x, int64_t x_stride,
                   int32_t n_tok, float* y, int64_t y_stride) {
  if (n_tok <= 0 || w.n_out <= 0) return cudaSuccess;
  switch (w.type) {
    case GgmlType::F32:
      return launch_f32(s, w, x, x_stride, n_tok, y, y_stride);
    case GgmlType::F16:
      return launch_mma<GgmlType::F16>(s, w, x, x_stride, n_tok, y, y_stride);
    case GgmlType::BF16:
      return launch_mma<GgmlType::BF16>(s, w, x, x_stride, n_tok, y, y_stride);
    case GgmlType::Q8_0:
      return launch_mma<GgmlType::Q8_0>(s, w, x, x_stride, n_tok, y, y_stride);
    case GgmlType::Q4_0:
      return launch_mma<GgmlType::Q4_0>(s, w, x, x_stride, n_tok, y, y_stride);
    case GgmlType::Q4_K:
      return launch_mma<GgmlType::Q4_K>(s, w, x, x_stride, n_tok, y, y_stride);
    case GgmlType::Q6_K:
      return launch_mma<GgmlType::Q6_K>(s, w, x, x_stride, n_tok, y, y_stride);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t get_rows(cudaStream_t s, const WeightMatrix& w, const int32_t* ids, int32_t n,
                     float* out) {
  if (n <= 0) return cudaSuccess;
  switch (w.type) {
    case GgmlType::F32:
      return launch_get_rows_t<GgmlType::F32>(s, w, ids, n, out);
    case GgmlType::F16:
      return launch_get_rows_t<GgmlType::F16>(s, w, ids, n, out);
    case GgmlType::BF16:
      return launch_get_rows_t<GgmlType::BF16>(s, w, ids, n, out);
    case GgmlType::Q8_0:
      return launch_get_rows_t<GgmlType::Q8_0>(s, w, ids, n, out);
    case GgmlType::Q4_0:
      return launch_get_rows_t<GgmlType::Q4_0>(s, w, ids, n, out);
    case GgmlType::Q4_K:
      return launch_get_rows_t<GgmlType::Q4_K>(s, w, ids, n, out);
    case GgmlType::Q6_K:
      return launch_get_rows_t<GgmlType::Q6_K>(s, w, ids, n, out);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace geist::cuda
