// Internal to the 8-bit decode GEMVs (gemv_q8_cuda.cu: one and two tokens; gemv_rows_q8_cuda.cu:
// three to sixteen): the one- and two-token layout (a block of kGvWarps warps owns kGvRows rows,
// lane l takes block pair 32 s + l in pass s) and its exact dp4a dot, the activations' quantizer
// (into shared memory, or by a grid into the 3-16-token GEMV's scratch) and the early-trigger
// rule. The arithmetic is the one stated at the top of
// matmul_q8_cuda.cu, bitwise.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/matmul_common.cuh"
#include "backends/cuda/matmul_q8_cuda.cuh"

namespace geist::cuda::q8 {

// Bandwidth first: a block owns 16 rows, a warp two of them, and lane l takes block pair
// 32 s + l of both rows in pass s, so that a warp reads 2 KB of each row with one 64-byte
// load per lane (4 x 16 bytes, several passes' loads in flight across warps). The block
// quantizes the activations into shared memory once before its first pass (the first pass's
// weight loads are already in flight then), the isums are exact dp4a sums held per lane, and
// after each pass the lanes write the blocks' terms to the warp's shared slice, where one lane
// per (row, token) folds the pass's blocks into its acc in block order (the next pass's weight
// loads are issued before the fold, so they overlap it).
constexpr int kGvWarps = 8;
constexpr int kGvThreads = 32 * kGvWarps;
constexpr int kGvRowsPerWarp = 2;
constexpr int kGvRows = kGvWarps * kGvRowsPerWarp;  // == kDecRows: the same block numbering
constexpr int kGvPass = 32;                         // block pairs per pass: one per lane
constexpr size_t kGvMaxSmem = 48 * 1024;            // no opt-in
static_assert(kGvRows == kDecRows, "the batch's block numbering is shared");

__device__ __forceinline__ int32_t dot16(uint4 a, uint4 b, int h) {  // h: chunk 2k or 2k + 1
  const int32_t s =
      __dp4a(static_cast<int>(h == 0 ? a.x : a.z), static_cast<int>(h == 0 ? b.x : b.z), 0);
  return __dp4a(static_cast<int>(h == 0 ? a.y : a.w), static_cast<int>(h == 0 ? b.y : b.w), s);
}

// The activations' codes of NT tokens into shared memory, by the whole block (4 lanes per
// 32-block; whole warps stay in the loop for the shuffles): codes [NT][P][pairs][4] with quad q
// of pair k stored at quad (q + k / 2) % 4 (lane l then reads its quad j of pair 32 s + l at
// (j + l / 2) % 4, and the 8 lanes of a quarter warp hit the 8 different 16-byte bank groups),
// steps dxs [NT][ds] (ds >= 2 * pairs). The caller synchronises the block after it. Thread tid
// of nthreads (a multiple of 32): the block's, or a grid's writing to global memory.
template <int P, int NT>
__device__ __forceinline__ void quantize_x(const float* __restrict__ x, int64_t x_stride, bool vec,
                                           int pairs, int nb, uint4* codes, float* dxs, int ds,
                                           int tid, int nthreads = kGvThreads) {
  const int lane = tid & 31, wp = tid >> 5;
  const int items = NT * 2 * pairs * 4;
  for (int base = wp * 32; base < items; base += nthreads) {
    const int it = base + lane;
    const bool live = it < items;
    const int grp = it >> 2, q = it & 3;
    const int t = live ? grp / (2 * pairs) : 0, b = live ? grp % (2 * pairs) : 0;
    float va[4], vb[4];
    const int64_t i0 = static_cast<int64_t>(b) * 32 + 4 * q;
    mm::x_load4(x, x_stride, NT, vec, live && b < nb, t, i0, va);
    mm::x_load4(x, x_stride, NT, vec, live && b < nb, t, i0 + 16, vb);
    const float v[8] = {va[0], va[1], va[2], va[3], vb[0], vb[1], vb[2], vb[3]};
    uint32_t lo[P], hi[P];
    const float dx = mm::quant_quad<P>(v, lo, hi);
    if (live) {
      const int k = b >> 1;
      uint2* dst =
          reinterpret_cast<uint2*>(codes + (t * P * pairs + k) * 4 + ((q + (k >> 1)) & 3)) +
          (b & 1);
#pragma unroll
      for (int p = 0; p < P; ++p) dst[p * pairs * 8] = make_uint2(lo[p], hi[p]);
      if (q == 0) dxs[t * ds + b] = dx;
    }
  }
}

// Whether the kernel after a GEMV over the weights of b may launch while it runs (launch_pdl:
// pdl_trigger right after the wait; else each block triggers by exiting); gemv_q8_cuda.cu
// says why the weights' size decides.
cudaError_t early_trigger(const DecBatch& b, bool* early);

}  // namespace geist::cuda::q8
