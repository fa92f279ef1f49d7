// The three- to sixteen-token GEMV of the 8-bit path (Q8_0, Q4_0): the matmuls of a batched
// decode step of 3-16 sessions. The arithmetic is the one stated at the top of matmul_q8_cuda.cu,
// bitwise: the same (float(isum_b), dw_b * dx_b) terms folded from +0 in block order.
//
// The exact int8 dots are tensor-core products (mma m16n8k32 s8): a row group is 8 weight rows,
// the mma's 8 columns; its 16 rows are 8 tokens' activation codes, tile u's tokens 8u..8u + 7 of
// the first plane in rows 0..7 and (Q8_0) of the second plane in rows 8..15, so that lane (g, q)
// of a warp holds in its C registers both planes of token 8u + g against weight rows 2q and
// 2q + 1, and isum_b = kQ8Fine * c0 + c2 (c1, c3 for row 2q + 1) exactly; Q4_0 leaves rows 8..15
// zero. 9-16 tokens are two tiles: one mma each on the same weight fragment, so the weights are
// still read once. The repacked Q8_0 rows (and PairLoader's Q4_0 quads) are the B fragments as
// they lie: lane (g, q) loads quad q of a block pair of row g, 16 bytes, and the activation codes
// are the A fragments the same way: quantize_x's layout, written once per call by
// rows_quantize_kernel to a device scratch (every block of the GEMV quantizing all the tokens
// itself cost more than the weights' read at n_in 8192) and read by the warps through the
// read-only cache. A step of a block is one pass of 32 block pairs of a group, 4 pairs a warp;
// the warps write their blocks' float(isum_b) and the rows' f16 scales to the step's fold slice,
// and after one barrier a lane per (row, token) folds the pass's 64 blocks in order, computing
// dw_b * dx_b itself (the rounded product the other kernels fold). Slices and weight registers
// are double-buffered: the loads of step s + 2 are issued before step s is folded. The blocks
// stay: a grid of as many blocks as fit walks the steps of the groups blockIdx.x,
// blockIdx.x + gridDim.x, ... of all the batch's matrices. Every weight byte is read once for all
// the tokens, and a weight byte costs a few tensor-core cycles, not NT dp4a. Shared memory is the
// two fold slices alone (37 KB at 8 tokens, 71 KB at 16: past 48 KB the launch opts in), for any
// n_in.
#include <algorithm>
#include <utility>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/gemv_q8_cuda.cuh"
#include "backends/cuda/launch_cuda.cuh"
#include "backends/cuda/matmul_common.cuh"
#include "backends/cuda/matmul_q8_cuda.cuh"

namespace geist::cuda::q8 {

namespace {

using mm::f16_bits;
using mm::kQ8Fine;
using mm::PairLoader;

constexpr int kRwGroup = 8;                   // weight rows of a group: the mma's columns
constexpr int kRwPairs = 4;                   // block pairs of a warp in a step
constexpr int kRwPass = kGvWarps * kRwPairs;  // block pairs of a step
constexpr int kRwFs = 2 * kRwPass + 1;        // floats per fold-slice row: odd, rows on other banks
constexpr int kRwBlocksPerSm = 2;
constexpr int kRwMinTok = 3, kRwMaxTok = kBatchMaxTok;
constexpr int kRwTile = 8;  // tokens of an mma: its rows 0..7 (and 8..15, the second plane)
static_assert(kRwPass == kGvPass, "a step is one pass of the one-token GEMV's layout");

// Shared memory: two fold slices, each isum [kRwGroup * NT][kRwFs] and scales [kRwGroup][kRwFs]
// (floats).
size_t rows_smem(int32_t nt) {
  return 2 * (kRwGroup * static_cast<size_t>(nt) + kRwGroup) * kRwFs * 4;
}

// The scratch: codes [NT][P][pairs][4] (uint4; room for P = 2 for either type, Q4_0 fills the
// first half), then steps dx [NT][2 * pairs + 1].
size_t codes_bytes(int32_t nt, int64_t n_in) {
  return static_cast<size_t>(nt) * 2 * static_cast<size_t>(mm::q8_pairs(n_in)) * 64;
}

// Quad q of block pair k of weight row r (PairLoader's), Q8_0's read past L1
// (ld.global.nc.L1::no_allocate): the weights stream through once, and L1 keeps the
// activation codes that every warp of the SM reads for every group.
template <GgmlType T>
__device__ __forceinline__ uint4 weight_quad(const DevW& w, int64_t r, int64_t k, int q) {
  if constexpr (T == GgmlType::Q8_0) {
    if (r >= w.n_out) return make_uint4(0u, 0u, 0u, 0u);
    const uint8_t* p = w.data + r * w.qrow + 64 * k + 16 * q;
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
  } else {
    return PairLoader<T>::codes(w, r, k, q);
  }
}

// The index in bt of the matrix of 8-row group g (bt.first counts 16-row blocks).
__device__ __forceinline__ int group_matrix(const DecBatch& bt, int64_t g) {
  int m = 0;
#pragma unroll
  for (int i = 1; i < kMaxMatmulBatch; ++i) {
    if (i < bt.n && g >= 2 * bt.first[i]) m = i;
  }
  return m;
}

// A warp's part of a step: its kRwPairs block pairs (wq: lane (g, q)'s quad of row g) against
// the codes of pairs k0.. k0 + kRwPairs - 1, one mma per 8-token tile; float(isum_b) of token
// 8u + g, rows 2q and 2q + 1 to is [row * NT + token][kRwFs] at the blocks' places in the pass,
// the rows' scales (wd: row g, pair k0 + q) to dw [row][kRwFs].
template <int P, int NT>
__device__ __forceinline__ void rows_mma(const uint4 (&wq)[kRwPairs], uint32_t wd,
                                         const uint4* __restrict__ codes, int pairs, int k0, int c0,
                                         float* is, float* dw, int lane) {
  constexpr int kTiles = (NT + kRwTile - 1) / kRwTile;
  const int g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int j = 0; j < kRwPairs; ++j) {
    const int k = k0 + j;
#pragma unroll
    for (int u = 0; u < kTiles; ++u) {
      const int t = kRwTile * u + g;  // the token of A row g
      uint4 a[P];
#pragma unroll
      for (int p = 0; p < P; ++p) {
        a[p] = t < NT && k < pairs
                   ? __ldg(codes + ((t * P + p) * pairs + k) * 4 + ((q + (k >> 1)) & 3))
                   : make_uint4(0u, 0u, 0u, 0u);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t b0 = h == 0 ? wq[j].x : wq[j].z, b1 = h == 0 ? wq[j].y : wq[j].w;
        const uint32_t a0 = h == 0 ? a[0].x : a[0].z, a2 = h == 0 ? a[0].y : a[0].w;
        uint32_t a1 = 0u, a3 = 0u;
        if constexpr (P == 2) a1 = h == 0 ? a[1].x : a[1].z, a3 = h == 0 ? a[1].y : a[1].w;
        int32_t c[4] = {0, 0, 0, 0};
        mm::mma_s8(c, a0, a1, a2, a3, b0, b1);
        if (t < NT) {
          const int col = c0 + 2 * j + h;
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int32_t v = P == 2 ? c[r] * kQ8Fine + c[2 + r] : c[r];
            is[((2 * q + r) * NT + t) * kRwFs + col] = __int2float_rn(v);
          }
        }
      }
    }
  }
  dw[g * kRwFs + c0 + 2 * q] = f16_bits(wd & 0xFFFFu);
  dw[g * kRwFs + c0 + 2 * q + 1] = f16_bits(wd >> 16);
}

// The activations of NT tokens as quantize_x writes them, into the scratch (codes, then dxs),
// by every thread of the grid.
template <int P, int NT>
__global__ void __launch_bounds__(kGvThreads)
    rows_quantize_kernel(const float* __restrict__ x, int64_t x_stride, bool vec, int pairs, int nb,
                         uint4* codes, float* dxs) {
  pdl_begin();  // launched with launch_pdl
  quantize_x<P, NT>(x, x_stride, vec, pairs, nb, codes, dxs, 2 * pairs + 1,
                    static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x),
                    static_cast<int>(gridDim.x * blockDim.x));
}

template <GgmlType T, int NT>
__global__ void __launch_bounds__(kGvThreads, kRwBlocksPerSm)
    gemv_rows_kernel(const DecBatch bt, int64_t groups, const uint4* __restrict__ codes,
                     const float* __restrict__ dxs, bool early) {
  constexpr int P = T == GgmlType::Q8_0 ? 2 : 1;
  constexpr int kSlice = (kRwGroup * NT + kRwGroup) * kRwFs;  // floats of a fold slice
  extern __shared__ float slices[];                           // [2][kSlice]
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, wp = tid >> 5;
  const int64_t n_in = bt.w[0].n_in;  // the same for every matrix of the batch
  const int pairs = static_cast<int>(mm::q8_pairs(n_in));
  const int nb = static_cast<int>(n_in / 32);
  const int ds = 2 * pairs + 1;
  const int npass = (pairs + kRwPass - 1) / kRwPass;
  const int64_t grid = gridDim.x, blk = blockIdx.x;
  const int64_t nsteps = (groups - blk + grid - 1) / grid * npass;
  // Step st: pass st % npass of group blk + st / npass * grid.
  const auto group_of = [&](int64_t st) { return blk + st / npass * grid; };

  uint4 wq[2][kRwPairs];  // [step % 2][pair]: lane (g, q)'s quad q of row g
  uint32_t wd[2];         // [step % 2]: row g's scales of pair wp * kRwPairs + q
  auto fetch = [&](int bf, int64_t st) {
    const bool ok = st < nsteps;
    const int64_t g = ok ? group_of(st) : 0;
    const int m = group_matrix(bt, g);
    DevW w = bt.w[0];
#pragma unroll
    for (int i = 1; i < kMaxMatmulBatch; ++i) {
      if (i == m) w = bt.w[i];
    }
    const int64_t r = (g - 2 * bt.first[m]) * kRwGroup + (lane >> 2);
    const int k0 = static_cast<int>(st % npass) * kRwPass + wp * kRwPairs;
#pragma unroll
    for (int j = 0; j < kRwPairs; ++j) {
      const bool live = ok && k0 + j < pairs;
      wq[bf][j] = live ? weight_quad<T>(w, r, k0 + j, lane & 3) : make_uint4(0u, 0u, 0u, 0u);
    }
    wd[bf] = ok && k0 + (lane & 3) < pairs ? PairLoader<T>::scales(w, r, k0 + (lane & 3)) : 0u;
  };
  fetch(0, 0);  // weights only: before the wait (launch_pdl)
  fetch(1, 1);
  pdl_wait();                // the codes are rows_quantize_kernel's
  if (early) pdl_trigger();  // else at exit (early_trigger)

  const int fi = tid / NT, ft = tid % NT;  // the fold's row and token (tid < kRwGroup * NT)
  float acc = 0.0f;
  for (int64_t st0 = 0; st0 < nsteps; st0 += 2) {
#pragma unroll
    for (int bf = 0; bf < 2; ++bf) {
      const int64_t st = st0 + bf;
      if (st < nsteps) {
        const int ps = static_cast<int>(st % npass);
        float* is = slices + bf * kSlice;
        float* dw = is + kRwGroup * NT * kRwFs;
        rows_mma<P, NT>(wq[bf], wd[bf], codes, pairs, ps * kRwPass + wp * kRwPairs,
                        2 * wp * kRwPairs, is, dw, lane);
        fetch(bf, st + 2);
        // The slice is complete; the other one was folded before any thread got here (the
        // folds of step st - 1 come before this barrier in program order).
        __syncthreads();
        if (tid < kRwGroup * NT) {
          const int b0 = 2 * kRwPass * ps;
          const int nbs = nb - b0 < 2 * kRwPass ? nb - b0 : 2 * kRwPass;
          const float* fis = is + tid * kRwFs;
          const float* fdw = dw + fi * kRwFs;
          const float* fdx = dxs + ft * ds + b0;
#pragma unroll 8
          for (int b = 0; b < nbs; ++b) {
            acc = __fmaf_rn(fis[b], __fmul_rn(fdw[b], __ldg(fdx + b)), acc);
          }
          if (ps == npass - 1) {  // the group's rows are done
            const int64_t g = group_of(st);
            const int m = group_matrix(bt, g);
            const int64_t r = (g - 2 * bt.first[m]) * kRwGroup + fi;
            if (r < bt.w[m].n_out) bt.y[m][ft * bt.y_stride[m] + r] = acc;
            acc = 0.0f;
          }
        }
      }
    }
  }
}

using RowsKernel = void (*)(const DecBatch, int64_t, const uint4*, const float*, bool);
using QuantKernel = void (*)(const float*, int64_t, bool, int, int, uint4*, float*);

// The kernels' instances for NT = kRwMinTok + i, i < sizeof...(I), in a table by n_tok.
template <GgmlType T, int... I>
constexpr RowsKernel rows_table[] = {gemv_rows_kernel<T, kRwMinTok + I>...};
template <int P, int... I>
constexpr QuantKernel quant_table[] = {rows_quantize_kernel<P, kRwMinTok + I>...};

template <GgmlType T, int... I>
RowsKernel rows_kernel_of(int32_t n_tok, std::integer_sequence<int, I...>) {
  return rows_table<T, I...>[n_tok - kRwMinTok];
}
template <int P, int... I>
QuantKernel quant_kernel_of(int32_t n_tok, std::integer_sequence<int, I...>) {
  return quant_table<P, I...>[n_tok - kRwMinTok];
}
using RwTokens = std::make_integer_sequence<int, kRwMaxTok - kRwMinTok + 1>;

template <GgmlType T>
RowsKernel rows_kernel(int32_t n_tok) {
  return n_tok >= kRwMinTok && n_tok <= kRwMaxTok ? rows_kernel_of<T>(n_tok, RwTokens{}) : nullptr;
}

template <int P>
QuantKernel quant_kernel(int32_t n_tok) {  // n_tok within [kRwMinTok, kRwMaxTok]
  return quant_kernel_of<P>(n_tok, RwTokens{});
}

// An attribute of the current device.
cudaError_t device_attr(cudaDeviceAttr attr, int* v) {
  int dev = 0;
  const cudaError_t e = cudaGetDevice(&dev);
  return e == cudaSuccess ? cudaDeviceGetAttribute(v, attr, dev) : e;
}

}  // namespace

size_t rows_scratch_bytes(int32_t n_tok, int64_t n_in) {
  if (n_tok < kRwMinTok || n_tok > kRwMaxTok) return 0;
  const size_t pairs = static_cast<size_t>(mm::q8_pairs(n_in));
  return codes_bytes(n_tok, n_in) + static_cast<size_t>(n_tok) * (2 * pairs + 1) * 4;
}

bool rows_launch(cudaStream_t s, GgmlType t, const DecBatch& b, int64_t groups, const float* x,
                 int64_t x_stride, int32_t n_tok, bool vec, void* scratch, size_t scratch_bytes,
                 cudaError_t* err) {
  const RowsKernel kernel =
      t == GgmlType::Q8_0 ? rows_kernel<GgmlType::Q8_0>(n_tok) : rows_kernel<GgmlType::Q4_0>(n_tok);
  const int64_t n_in = b.w[0].n_in;
  if (kernel == nullptr || scratch == nullptr || scratch_bytes < rows_scratch_bytes(n_tok, n_in)) {
    return false;  // decode_kernel takes it
  }
  uint4* codes = static_cast<uint4*>(scratch);
  float* dxs = reinterpret_cast<float*>(static_cast<uint8_t*>(scratch) + codes_bytes(n_tok, n_in));
  const int pairs = static_cast<int>(mm::q8_pairs(n_in));
  const size_t smem = rows_smem(n_tok);
  // Past the 48 KB default (more than 10 tokens) the kernel opts in: a function attribute, not a
  // stream operation, so it may be set while a step is captured (launch_pdl's carveout too).
  cudaError_t e = smem <= kGvMaxSmem
                      ? cudaSuccess
                      : cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem));
  int per_sm = 0, sms = 0;
  if (e == cudaSuccess) {
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kGvThreads, smem);
  }
  if (e == cudaSuccess) e = device_attr(cudaDevAttrMultiProcessorCount, &sms);
  bool early = true;
  if (e == cudaSuccess) e = early_trigger(b, &early);
  if (e == cudaSuccess) {
    // One item per thread: 4 lanes per 32-block of a token.
    const int64_t items = int64_t{n_tok} * 2 * pairs * 4;
    const unsigned qblocks = static_cast<unsigned>((items + kGvThreads - 1) / kGvThreads);
    const QuantKernel qk = t == GgmlType::Q8_0 ? quant_kernel<2>(n_tok) : quant_kernel<1>(n_tok);
    e = launch_pdl(qk, dim3(qblocks), dim3(kGvThreads), 0, s, x, x_stride, vec, pairs,
                   static_cast<int>(n_in / 32), codes, dxs);
  }
  if (e == cudaSuccess) {
    const int64_t groups8 = 2 * groups;  // 8-row groups of the 16-row blocks
    const int64_t grid =
        std::min<int64_t>(groups8, int64_t{sms} * std::max(1, std::min(per_sm, kRwBlocksPerSm)));
    e = launch_pdl(kernel, dim3(static_cast<unsigned>(grid)), dim3(kGvThreads), smem, s, b, groups8,
                   static_cast<const uint4*>(codes), static_cast<const float*>(dxs), early);
  }
  *err = e;
  return true;
}

}  // namespace geist::cuda::q8
