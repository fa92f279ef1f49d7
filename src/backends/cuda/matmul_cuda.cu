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
//   - the chunks form num_parts(n_chunks) contiguous parts, each starting at an even chunk
//     (part_begin); a part's sum starts at +0 and takes the mma chain (hi.hi, hi.lo, lo.hi)
//     for step 0 then step 1 of every chunk in order (Q8_0 / Q4_0: the exact-integer form of
//     ScaledInt below);
//   - the element is part 0's sum, then + part 1's, + part 2's, ... (round to nearest).
// A tensor-core product of an output element depends only on its row of A, its column of B
// and its accumulator, so padding tokens (zero columns) and the other tokens of the tile do
// not change it. The decode kernels (n_tok <= 8) compute the parts on different warps and
// fold them through shared memory; the prefill kernels walk the parts in one warp (Q8_0 and
// Q4_0: the tiled kernel of matmul_prefill_cuda.cu; the helpers both files use are in
// matmul_common.cuh). All give every element bitwise the same value
// (MatmulRowsAreBitwiseIndependentOfBatchSize, CudaMatmulPrefill.*).
//
// Decode reads every weight byte once per token, so its speed is the memory bandwidth it
// reaches. Q8_0 weights are repacked at upload (DevW) so that a lane's bytes of two chunks of
// a row are one aligned 16-byte load, and the Q8_0 decode kernel keeps several such loads in
// flight per lane ahead of its mma chain.
#include <cuda_bf16.h>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_quant.cuh"
#include "backends/cuda/matmul_common.cuh"
#include "backends/cuda/matmul_prefill_cuda.h"

namespace geist::cuda {

namespace {

using namespace mm;  // NOLINT(build/namespaces): the helpers shared with the prefill kernel

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

constexpr int kDecWarps = 16;  // decode block: 16 rows, one warp per k part
constexpr int kPreMR = 2;      // prefill warp tile: 2 x 16 rows ...
constexpr int kPreNR = 4;      // ... by 4 x 8 tokens
constexpr int kPreWarps = 4;   // prefill block: 32 rows x 128 tokens, warps along tokens
constexpr int kQ8Depth = 2;    // Q8_0 decode: chunk pairs in flight per lane
// Q8_0 decode: activations staged in shared memory next to the 8 KB of part sums; larger
// batches take the prefill kernel (same bits).
constexpr size_t kQ8MaxStage = 40 * 1024;

// One row's 8 elements of a chunk for this lane, as hi/lo words: word j holds elements
// 2j, 2j + 1 (word 2s + p is step s's k-slot pair p). Rows past n_out are zero.
template <GgmlType T>
__device__ __forceinline__ void load_w(const DevW& w, int64_t r, int64_t i0, uint32_t hi[4],
                                       uint32_t lo[4]) {
  float v[8];
  if (r < w.n_out) {
    WeightDecoder<T>::load8(w.data + static_cast<size_t>(r) * w.row_bytes, i0, w.n_in, v);
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
__device__ __forceinline__ void part_sum(const DevW& w, int64_t r0, const float* __restrict__ x,
                                         int64_t x_stride, int32_t n_tok, bool vec, int64_t t0,
                                         int64_t c0, int64_t c1, float acc[MR][NR][4]) {
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
          if (r < w.n_out) {
            ScaledInt<T>::load(w, r, c, q, aq[i][h], &dw[i][h]);
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
        load_x(x, x_stride, n_tok, w.n_in, vec, t0 + 8 * j + g, i0, bh, bl);
#pragma unroll
        for (int i = 0; i < MR; ++i) scaled_chunk(aq[i], dw[i], bh, bl, acc[i][j]);
      }
    } else {
      uint32_t ah[MR][2][4], al[MR][2][4];  // [m-tile][row g / g + 8][word]
#pragma unroll
      for (int i = 0; i < MR; ++i) {
        load_w<T>(w, r0 + 16 * i + g, i0, ah[i][0], al[i][0]);
        load_w<T>(w, r0 + 16 * i + g + 8, i0, ah[i][1], al[i][1]);
      }
#pragma unroll
      for (int j = 0; j < NR; ++j) {
        uint32_t bh[4], bl[4];
        load_x(x, x_stride, n_tok, w.n_in, vec, t0 + 8 * j + g, i0, bh, bl);
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

// Folds the block's part sums (part[p][row][token], p < parts) in part order and writes y.
__device__ __forceinline__ void fold_parts(const float (*part)[16][8], int parts, int64_t r0,
                                           int64_t n_out, int32_t n_tok, float* __restrict__ y,
                                           int64_t y_stride) {
  if (threadIdx.x < 128) {
    const int rr = threadIdx.x >> 3;
    const int t = threadIdx.x & 7;
    float total = part[0][rr][t];
    for (int p = 1; p < parts; ++p) total = __fadd_rn(total, part[p][rr][t]);
    if (t < n_tok && r0 + rr < n_out) y[t * y_stride + r0 + rr] = total;
  }
}

__device__ __forceinline__ void store_part(float (*part)[16][8], int p, const float acc[4]) {
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2, q = lane & 3;
  part[p][g][2 * q] = acc[0];
  part[p][g][2 * q + 1] = acc[1];
  part[p][g + 8][2 * q] = acc[2];
  part[p][g + 8][2 * q + 1] = acc[3];
}

// n_tok <= 8: block = 16 rows x 8 tokens; warp wp computes parts wp, wp + kDecWarps, ...
template <GgmlType T>
__global__ void __launch_bounds__(kDecWarps * 32)
    mma_decode_kernel(const DevW w, const float* __restrict__ x, int64_t x_stride, int32_t n_tok,
                      bool vec, float* __restrict__ y, int64_t y_stride) {
  __shared__ float part[kMaxParts][16][8];  // [part][row of the block][token]
  const int wp = threadIdx.x >> 5;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * 16;
  const int64_t n_chunks = (w.n_in + 31) / 32;
  const int parts = num_parts(n_chunks);
  for (int p = wp; p < parts; p += kDecWarps) {
    float acc[1][1][4];
    part_sum<T, 1, 1>(w, r0, x, x_stride, n_tok, vec, 0, part_begin(n_chunks, parts, p),
                      part_begin(n_chunks, parts, p + 1), acc);
    store_part(part, p, acc[0][0]);
  }
  __syncthreads();
  fold_parts(part, parts, r0, w.n_out, n_tok, y, y_stride);
}

// Q8_0, n_tok <= 8: the same arithmetic as part_sum, fed for bandwidth. Each lane holds
// kQ8Depth chunk pairs of its two rows in registers (16-byte loads of the repacked rows),
// issued before the activations are staged, and loads the next pair as soon as one is used;
// the activations are split into hi / lo words once per block, in shared memory:
// xs[((t * n_chunks + c) * 4 + q) * 2 + {0: hi, 1: lo}] = lane quad q's words of chunk c.
struct Q8Pair {
  uint4 w[2];     // [row g / g + 8]: chunk 2k's quants in x, y; chunk 2k + 1's in z, w
  uint32_t d[2];  // [row g / g + 8]: f16 scales, chunk 2k low half, 2k + 1 high half
};

// Pair k of this lane's rows: p0 / p1 its quant bytes (row g / g + 8, at 16q), s0 / s1 its
// scales; nullptr for rows past n_out (zeros).
struct Q8Rows {
  const uint8_t* p[2];
  const uint16_t* s[2];
};

__device__ __forceinline__ void q8_load_pair(const Q8Rows& rows, int k, Q8Pair* p) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (rows.p[h] != nullptr) {
      p->w[h] = __ldg(reinterpret_cast<const uint4*>(rows.p[h] + 64 * k));
      p->d[h] = __ldg(reinterpret_cast<const uint32_t*>(rows.s[h] + 2 * k));
    } else {
      p->w[h] = make_uint4(0u, 0u, 0u, 0u);
      p->d[h] = 0u;
    }
  }
}

// Up to kMaxMatmulBatch matrices of one n_in over the same activations: matrix i takes the
// blocks from first[i] on.
struct Q8Batch {
  DevW w[kMaxMatmulBatch];
  float* y[kMaxMatmulBatch];
  int64_t y_stride[kMaxMatmulBatch];
  int64_t first[kMaxMatmulBatch];
  int n;
};

__global__ void __launch_bounds__(kDecWarps * 32, 2)
    q8_decode_kernel(const Q8Batch b, const float* __restrict__ x, int64_t x_stride, int32_t n_tok,
                     bool vec) {
  extern __shared__ uint4 xs[];             // see above: [n_tok][n_chunks][4][2]
  __shared__ float part[kMaxParts][16][8];  // [part][row of the block][token]
  DevW w = b.w[0];
  float* y = b.y[0];
  int64_t y_stride = b.y_stride[0], first = 0;
#pragma unroll
  for (int i = 1; i < kMaxMatmulBatch; ++i) {
    if (i < b.n && static_cast<int64_t>(blockIdx.x) >= b.first[i]) {
      w = b.w[i];
      y = b.y[i];
      y_stride = b.y_stride[i];
      first = b.first[i];
    }
  }
  const int lane = threadIdx.x & 31;
  const int wp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int64_t r0 = (static_cast<int64_t>(blockIdx.x) - first) * 16;
  const int n_chunks = static_cast<int>(w.n_in / 32);
  const int parts = num_parts(n_chunks);
  int c0 = 0, c1 = 0;
  if (wp < parts) {
    c0 = static_cast<int>(part_begin(n_chunks, parts, wp));
    c1 = static_cast<int>(part_begin(n_chunks, parts, wp + 1));
  }
  const int n_pk = (c1 - c0 + 1) / 2;  // pairs of this warp's part, from pair c0 / 2
  Q8Rows rows;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t r = r0 + g + 8 * h;
    const bool ok = r < w.n_out;
    rows.p[h] = ok ? w.data + r * w.qrow + 16 * q + 32 * c0 : nullptr;
    rows.s[h] = ok ? w.scales + r * w.drow + c0 : nullptr;
  }
  Q8Pair buf[kQ8Depth];
#pragma unroll
  for (int i = 0; i < kQ8Depth; ++i) {
    if (i < n_pk) q8_load_pair(rows, i, &buf[i]);
  }
  const int items = n_tok * n_chunks * 4;
  for (int it = static_cast<int>(threadIdx.x); it < items; it += static_cast<int>(blockDim.x)) {
    const int tc = it >> 2;
    uint32_t hi[4], lo[4];
    load_x(x, x_stride, n_tok, w.n_in, vec, tc / n_chunks, (tc % n_chunks) * 32 + 8 * (it & 3), hi,
           lo);
    xs[2 * it] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
    xs[2 * it + 1] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
  }
  __syncthreads();
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  // This lane's activation words of chunk c0 (token g; none past n_tok).
  const uint4* px = g < n_tok ? xs + 2 * ((g * n_chunks + c0) * 4 + q) : nullptr;
  for (int i0 = 0; i0 < n_pk; i0 += kQ8Depth) {
#pragma unroll
    for (int j = 0; j < kQ8Depth; ++j) {
      const int i = i0 + j;
      if (i < n_pk) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (h == 0 || c0 + 2 * i + 1 < c1) {
            uint32_t a[2][4];
            float dw[2];
#pragma unroll
            for (int rr = 0; rr < 2; ++rr) {
              const uint4 v = buf[j].w[rr];
              i8x8_bf16(h == 0 ? v.x : v.z, h == 0 ? v.y : v.w, a[rr]);
              dw[rr] = f16_bits(h == 0 ? buf[j].d[rr] & 0xFFFFu : buf[j].d[rr] >> 16);
            }
            uint4 bh = make_uint4(0u, 0u, 0u, 0u), bl = bh;
            if (px != nullptr) {
              bh = px[8 * (2 * i + h)];
              bl = px[8 * (2 * i + h) + 1];
            }
            const uint32_t bhw[4] = {bh.x, bh.y, bh.z, bh.w};
            const uint32_t blw[4] = {bl.x, bl.y, bl.z, bl.w};
            scaled_chunk(a, dw, bhw, blw, acc);
          }
        }
        if (i + kQ8Depth < n_pk) q8_load_pair(rows, i + kQ8Depth, &buf[j]);
      }
    }
  }
  if (wp < parts) store_part(part, wp, acc);
  __syncthreads();
  fold_parts(part, parts, r0, w.n_out, n_tok, y, y_stride);
}

// n_tok > 8: block = 32 rows x 128 tokens, each warp 32 rows x 32 tokens, parts in order.
template <GgmlType T>
__global__ void __launch_bounds__(kPreWarps * 32)
    mma_prefill_kernel(const DevW w, const float* __restrict__ x, int64_t x_stride, int32_t n_tok,
                       bool vec, float* __restrict__ y, int64_t y_stride) {
  const int lane = threadIdx.x & 31;
  const int wp = threadIdx.x >> 5;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * (16 * kPreMR);
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * (kPreWarps * 8 * kPreNR) +
                     static_cast<int64_t>(wp) * (8 * kPreNR);
  if (t0 >= n_tok) return;
  const int64_t n_chunks = (w.n_in + 31) / 32;
  const int parts = num_parts(n_chunks);
  float total[kPreMR][kPreNR][4];
  for (int p = 0; p < parts; ++p) {
    float acc[kPreMR][kPreNR][4];
    part_sum<T, kPreMR, kPreNR>(w, r0, x, x_stride, n_tok, vec, t0, part_begin(n_chunks, parts, p),
                                part_begin(n_chunks, parts, p + 1), acc);
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
        if (r < w.n_out && t < n_tok) y[t * y_stride + r] = total[i][j][e];
      }
    }
  }
}

template <GgmlType T>
cudaError_t launch_mma(cudaStream_t s, const WeightMatrix& wm, const float* x, int64_t x_stride,
                       int32_t n_tok, float* y, int64_t y_stride) {
  const DevW w = dev_w(wm);
  const bool vec = x_stride % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
  if (n_tok <= 8) {
    const int64_t blocks = (w.n_out + 15) / 16;
    if (blocks > 0x7fffffff) return cudaErrorInvalidConfiguration;
    if constexpr (T == GgmlType::Q8_0) {
      if (matmul_batchable(wm, n_tok)) {
        const MatmulOut one{wm, y, y_stride};
        return matmul_batch(s, &one, 1, x, x_stride, n_tok);
      }
      // Larger: the prefill kernel below, which gives the same bits.
    } else {
      mma_decode_kernel<T><<<static_cast<unsigned>(blocks), kDecWarps * 32, 0, s>>>(
          w, x, x_stride, n_tok, vec, y, y_stride);
      return cudaGetLastError();
    }
  }
  if (n_tok > 8 && matmul_prefill_supported(T)) {
    return matmul_prefill(s, wm, x, x_stride, n_tok, y, y_stride);  // the tiled kernel, same bits
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
        w, x + t * x_stride, x_stride, static_cast<int32_t>(nt), vec, y + t * y_stride, y_stride);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// Repacks GGUF Q8_0 rows (src, on the device) into the layout of DevW: one thread per row and
// chunk slot (the padding slot of an odd row writes zeros).
__global__ void repack_q8_0_kernel(const uint8_t* __restrict__ src, int64_t n_chunks, int64_t n_out,
                                   uint8_t* __restrict__ dst) {
  const int64_t slots = 2 * ((n_chunks + 1) / 2);
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n_out * slots) return;
  const int64_t r = idx / slots, c = idx % slots;
  const int64_t qrow = 32 * slots;
  uint8_t* qd = dst + r * qrow + 64 * (c >> 1) + 8 * (c & 1);
  uint16_t* dd = reinterpret_cast<uint16_t*>(dst + n_out * qrow) + r * slots + c;
  if (c < n_chunks) {
    const uint8_t* blk = src + (r * n_chunks + c) * 34;
    *dd = *reinterpret_cast<const uint16_t*>(blk);
    for (int i = 0; i < 32; ++i) qd[16 * (i / 8) + i % 8] = blk[2 + i];
  } else {
    *dd = 0;
    for (int i = 0; i < 32; ++i) qd[16 * (i / 8) + i % 8] = 0;
  }
}

template <GgmlType T>
__global__ void get_rows_kernel(const DevW w, const int32_t* __restrict__ ids,
                                float* __restrict__ out) {
  const int64_t t = blockIdx.x;
  const int64_t r = ids[t];
  const uint8_t* row = w.data + static_cast<size_t>(r) * w.row_bytes;
  float* dst = out + t * w.n_in;  // [n][n_in]
  for (int64_t i0 = static_cast<int64_t>(threadIdx.x) * 8; i0 < w.n_in;
       i0 += static_cast<int64_t>(blockDim.x) * 8) {
    float wv[8];
    if constexpr (T == GgmlType::Q8_0) {
      // The repacked layout (DevW): lane quad q's 8 bytes of chunk c; value q * d as
      // dequantize_row.
      const int64_t c = i0 / 32;
      const int qq = static_cast<int>(i0 % 32) / 8;
      const uint2 v = *reinterpret_cast<const uint2*>(w.data + r * w.qrow + 64 * (c >> 1) +
                                                      16 * qq + 8 * (c & 1));
      const float d = f16_bits(w.scales[r * w.drow + c]);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const uint32_t word = j < 4 ? v.x : v.y;
        const int8_t qv = static_cast<int8_t>((word >> (8 * (j & 3))) & 0xFFu);
        wv[j] = __fmul_rn(static_cast<float>(qv), d);
      }
    } else {
      WeightDecoder<T>::load8(row, i0, w.n_in, wv);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (i0 + j < w.n_in) dst[i0 + j] = wv[j];
    }
  }
}

template <GgmlType T>
cudaError_t launch_get_rows_t(cudaStream_t s, const WeightMatrix& w, const int32_t* ids, int32_t n,
                              float* out) {
  get_rows_kernel<T><<<n, 128, 0, s>>>(dev_w(w), ids, out);
  return cudaGetLastError();
}

size_t q8_stage_bytes(int64_t n_in, int32_t n_tok) {
  return static_cast<size_t>(n_tok) * static_cast<size_t>(n_in / 32) * 128;
}

}  // namespace

bool matmul_batchable(const WeightMatrix& w, int32_t n_tok) {
  return w.type == GgmlType::Q8_0 && n_tok >= 1 && n_tok <= 8 && w.n_out > 0 &&
         q8_stage_bytes(w.n_in, n_tok) <= kQ8MaxStage;
}

cudaError_t matmul_batch(cudaStream_t s, const MatmulOut* outs, int n, const float* x,
                         int64_t x_stride, int32_t n_tok) {
  if (n < 1 || n > kMaxMatmulBatch) return cudaErrorInvalidValue;
  Q8Batch b{};
  b.n = n;
  int64_t blocks = 0;
  for (int i = 0; i < n; ++i) {
    if (!matmul_batchable(outs[i].w, n_tok) || outs[i].w.n_in != outs[0].w.n_in) {
      return cudaErrorInvalidValue;
    }
    b.w[i] = dev_w(outs[i].w);
    b.y[i] = outs[i].y;
    b.y_stride[i] = outs[i].y_stride;
    b.first[i] = blocks;
    blocks += (outs[i].w.n_out + 15) / 16;
  }
  if (blocks > 0x7fffffff) return cudaErrorInvalidConfiguration;
  const bool vec = x_stride % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
  q8_decode_kernel<<<static_cast<unsigned>(blocks), kDecWarps * 32,
                     q8_stage_bytes(outs[0].w.n_in, n_tok), s>>>(b, x, x_stride, n_tok, vec);
  return cudaGetLastError();
}

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

size_t device_weight_bytes(GgmlType t, int64_t n_in, int64_t n_out) {
  if (t == GgmlType::Q8_0)
    return static_cast<size_t>(n_out) * static_cast<size_t>(q8_pairs(n_in)) * 68;
  return ggml_row_size(t, n_in) * static_cast<size_t>(n_out);
}

bool weight_is_repacked(GgmlType t) { return t == GgmlType::Q8_0; }

cudaError_t repack_weight(cudaStream_t s, const WeightMatrix& w, uint8_t* dst) {
  if (w.type != GgmlType::Q8_0 || w.n_out <= 0) return cudaSuccess;
  const int64_t n_chunks = w.n_in / 32;
  const int64_t total = w.n_out * 2 * q8_pairs(w.n_in);
  const int threads = 256;
  const int64_t blocks = (total + threads - 1) / threads;
  if (blocks > 0x7fffffff) return cudaErrorInvalidConfiguration;
  repack_q8_0_kernel<<<static_cast<unsigned>(blocks), threads, 0, s>>>(w.data, n_chunks, w.n_out,
                                                                       dst);
  return cudaGetLastError();
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
