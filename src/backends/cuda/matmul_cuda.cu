// Weight matrix kernels: matmul (dequantize inside the kernel) and get_rows.
//
// Q8_0 and Q4_0 weights take the 8-bit path: activations quantized to int8, int8 tensor cores,
// bitwise the CPU's Q8 formula (matmul_q8_cuda.cu states it; decode there, prefill in
// matmul_prefill_cuda.cu). This file dispatches to it and holds the other types' kernels.
//
// F32 weights keep the exact f32 path (one warp per output row, FMAs in a fixed order).
// F16, BF16, Q4_K, Q6_K and Q4_1, Q5_1, Q5_K, Q2_K, IQ4_XS run on the tensor cores: mma.sync
// m16n8k16 with bf16 inputs and f32 accumulation. A weight w (decoded to f32 bitwise as
// dequantize_row() does) and an activation x are each split into two bf16 terms, hi = bf16(v) and
// lo = bf16(v - hi), and the product is w_hi x_hi + w_hi x_lo + w_lo x_hi (three mma per k16 step):
// about 16 significant bits per factor, and no overflow (bf16 has f32's exponent range).
//
// Determinism (cuda_kernels.h): an output element's arithmetic is fixed by n_in alone.
//   - k runs over 32-element chunks; inside chunk c, lane quad q (lane & 3) feeds elements
//     [32c + 8q, 32c + 8q + 8) to step s = 0, 1 as the k-slots {2q, 2q + 1} <- 8q + 4s + {0, 1}
//     and {2q + 8, 2q + 9} <- 8q + 4s + {2, 3}, for the weights and the activations alike;
//   - the chunks form num_parts(n_chunks) contiguous parts, each starting at an even chunk
//     (part_begin); a part's sum starts at +0 and takes the mma chain (hi.hi, hi.lo, lo.hi)
//     for step 0 then step 1 of every chunk in order;
//   - the element is part 0's sum, then + part 1's, + part 2's, ... (round to nearest).
// A tensor-core product of an output element depends only on its row of A, its column of B
// and its accumulator, so padding tokens (zero columns) and the other tokens of the tile do
// not change it. The decode kernel (n_tok <= 8) computes the parts on different warps and
// folds them through shared memory; the prefill kernel walks the parts in one warp. Both give
// every element bitwise the same value (MatmulRowsAreBitwiseIndependentOfBatchSize).
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
    mma_decode_kernel<T><<<static_cast<unsigned>(blocks), kDecWarps * 32, 0, s>>>(
        w, x, x_stride, n_tok, vec, y, y_stride);
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
        w, x + t * x_stride, x_stride, static_cast<int32_t>(nt), vec, y + t * y_stride, y_stride);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// Repacks GGUF Q8_0 rows (src, on the device) into the layout of DevW: one thread per row and
// chunk slot (the padding slot of an odd row writes zeros). Element i's byte in the chunk's
// I8 slot order is s = i8_slot(i), lane quad s / 8's 8 bytes: at 16 (s / 8) + s % 8 of the pair.
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
    for (int i = 0; i < 32; ++i) qd[2 * i8_slot(i) - (i8_slot(i) & 7)] = blk[2 + i];
  } else {
    *dd = 0;
    for (int i = 0; i < 32; ++i) qd[2 * i8_slot(i) - (i8_slot(i) & 7)] = 0;
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
      // The repacked layout (DevW, repack_q8_0_kernel); value q * d as dequantize_row.
      const int64_t c = i0 / 32;
      const uint8_t* pair = w.data + r * w.qrow + 64 * (c >> 1) + 8 * (c & 1);
      const float d = f16_bits(w.scales[r * w.drow + c]);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int sl = i8_slot(static_cast<int>(i0 % 32) + j);
        const int8_t qv = static_cast<int8_t>(pair[2 * sl - (sl & 7)]);
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
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q5_K:
    case GgmlType::Q2_K:
    case GgmlType::IQ4_XS:
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

size_t matmul_scratch_bytes(const WeightMatrix& w, int32_t n_tok) {
  return n_tok > kBatchMaxTok ? matmul_prefill_scratch_bytes(w.type, w.n_in, n_tok)
                              : matmul_batch_scratch_bytes(w, n_tok);
}

cudaError_t matmul(cudaStream_t s, const WeightMatrix& w, const float* x, int64_t x_stride,
                   int32_t n_tok, float* y, int64_t y_stride, void* scratch, size_t scratch_bytes) {
  if (n_tok <= 0 || w.n_out <= 0) return cudaSuccess;
  if (w.type == GgmlType::Q8_0 || w.type == GgmlType::Q4_0) {
    if (n_tok > kBatchMaxTok && scratch != nullptr &&
        scratch_bytes >= matmul_prefill_scratch_bytes(w.type, w.n_in, 1)) {
      return matmul_prefill(s, w, x, x_stride, n_tok, y, y_stride, scratch, scratch_bytes);
    }
    // Decode, or without a prefill scratch: the decode kernels, kBatchMaxTok tokens at a time
    // (the same bits; the scratch only where it was sized for them).
    const bool dec = n_tok <= kBatchMaxTok && scratch_bytes >= matmul_batch_scratch_bytes(w, n_tok);
    for (int32_t t = 0; t < n_tok; t += kBatchMaxTok) {
      const MatmulOut one{w, y + t * y_stride, y_stride};
      const cudaError_t e = matmul_batch(s, &one, 1, x + t * x_stride, x_stride,
                                         n_tok - t < kBatchMaxTok ? n_tok - t : kBatchMaxTok,
                                         dec ? scratch : nullptr, dec ? scratch_bytes : 0);
      if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
  }
  switch (w.type) {
    case GgmlType::F32:
      return launch_f32(s, w, x, x_stride, n_tok, y, y_stride);
    case GgmlType::F16:
      return launch_mma<GgmlType::F16>(s, w, x, x_stride, n_tok, y, y_stride);
    case GgmlType::BF16:
      return launch_mma<GgmlType::BF16>(s, w, x, x_stride, n_tok, y, y_stride);
    case GgmlType::Q4_K:
      return launch_mma<GgmlType::Q4_K>(s, w, x, x_stride, n_tok, y, y_stride);
    case GgmlType::Q6_K:
      return launch_mma<GgmlType::Q6_K>(s, w, x, x_stride, n_tok, y, y_stride);
    case GgmlType::Q4_1:
      return launch_mma<GgmlType::Q4_1>(s, w, x, x_stride, n_tok, y, y_stride);
    case GgmlType::Q5_1:
      return launch_mma<GgmlType::Q5_1>(s, w, x, x_stride, n_tok, y, y_stride);
    case GgmlType::Q5_K:
      return launch_mma<GgmlType::Q5_K>(s, w, x, x_stride, n_tok, y, y_stride);
    case GgmlType::Q2_K:
      return launch_mma<GgmlType::Q2_K>(s, w, x, x_stride, n_tok, y, y_stride);
    case GgmlType::IQ4_XS:
      return launch_mma<GgmlType::IQ4_XS>(s, w, x, x_stride, n_tok, y, y_stride);
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
    case GgmlType::Q4_1:
      return launch_get_rows_t<GgmlType::Q4_1>(s, w, ids, n, out);
    case GgmlType::Q5_1:
      return launch_get_rows_t<GgmlType::Q5_1>(s, w, ids, n, out);
    case GgmlType::Q5_K:
      return launch_get_rows_t<GgmlType::Q5_K>(s, w, ids, n, out);
    case GgmlType::Q2_K:
      return launch_get_rows_t<GgmlType::Q2_K>(s, w, ids, n, out);
    case GgmlType::IQ4_XS:
      return launch_get_rows_t<GgmlType::IQ4_XS>(s, w, ids, n, out);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace geist::cuda
