// The three- to eight-token GEMV of the 8-bit path (Q8_0, Q4_0): the matmuls of a batched decode
// step of 3-8 sessions. The arithmetic is the one stated at the top of matmul_q8_cuda.cu,
// bitwise: the same (float(isum_b), dw_b * dx_b) terms folded from +0 in block order.
//
// The one-token GEMV's layout (gemv_q8_cuda.cuh: a warp owns two rows of a 16-row group, lane l
// takes block pair 32 s + l in pass s, one 64-byte load per row), with the work of a pass done
// token by token, so that the registers a lane holds do not grow with the tokens: for each token
// the lane's exact dp4a sums of its pair's two blocks, then float(isum) to the warp's fold slice
// [row][token][block]; the rows' f16 scales go once per pass to a slice [row][block]. One lane per
// (row, token) then folds the pass's blocks in order, computing dw_b * dx_b itself (the same
// rounded product the other kernels fold). The blocks stay: a grid of as many blocks as fit on
// the device quantizes the activations of all tokens once per block into shared memory and walks
// the row groups blockIdx.x, blockIdx.x + gridDim.x, ... of all the batch's matrices; a warp's
// (group, pass) steps form one stream in which the next two steps' weights are in flight while a
// step is folded. Every weight byte is read once for all the tokens.
//
// Shared memory grows with tokens and n_in (codes: 64 bytes a pair, token and plane): past 48 KB
// the kernel opts in (gemv_rows_setup raises the limit once; a launch checks it), and where even
// the device's opt-in limit is too small, rows_launch declines and decode_kernel runs instead.
#include <algorithm>

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

constexpr int kRwRows = kGvRowsPerWarp;
constexpr int kRwFs = 2 * kGvPass + 1;  // floats per fold-slice row: odd, so rows hit other banks
constexpr int kRwBlocksPerSm = 2;
constexpr int kRwMinTok = 3, kRwMaxTok = 8;

// Shared memory: codes [NT][P][pairs][4] (uint4), steps dx [NT][2 * pairs + 1], then per warp the
// fold slices: isum [kRwRows * NT][kRwFs] and scales [kRwRows][kRwFs] (floats).
size_t rows_smem(int planes, int32_t nt, int64_t n_in) {
  const size_t pairs = static_cast<size_t>(mm::q8_pairs(n_in)), t = static_cast<size_t>(nt);
  return t * planes * pairs * 64 + t * (2 * pairs + 1) * 4 +
         static_cast<size_t>(kGvWarps) * (kRwRows * t + kRwRows) * kRwFs * 4;
}

// The index in bt of the matrix of row group g (the last whose groups start at or before g).
__device__ __forceinline__ int group_matrix(const DecBatch& bt, int64_t g) {
  int m = 0;
#pragma unroll
  for (int i = 1; i < kMaxMatmulBatch; ++i) {
    if (i < bt.n && g >= bt.first[i]) m = i;
  }
  return m;
}

// One pass of a warp for NT tokens: lane's pair k of its kRwRows rows (weights wq, scales wd)
// against the codes; writes float(isum_b) of blocks 2k, 2k + 1 to is [row * NT + token][kRwFs] at
// 2 * lane + h, and the rows' scales to dw [row][kRwFs] at the same place.
template <int P, int NT>
__device__ __forceinline__ void rows_pass(const uint4 (&wq)[kRwRows][4],
                                          const uint32_t (&wd)[kRwRows], const uint4* codes,
                                          int pairs, int k, float* is, float* dw, int lane) {
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    int32_t d[kRwRows][P][2];
#pragma unroll
    for (int i = 0; i < kRwRows; ++i) {
#pragma unroll
      for (int p = 0; p < P; ++p) d[i][p][0] = d[i][p][1] = 0;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int quad = (j + (k >> 1)) & 3;
#pragma unroll
      for (int p = 0; p < P; ++p) {
        const uint4 a = codes[((t * P + p) * pairs + k) * 4 + quad];
#pragma unroll
        for (int i = 0; i < kRwRows; ++i) {
#pragma unroll
          for (int h = 0; h < 2; ++h) d[i][p][h] += dot16(wq[i][j], a, h);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kRwRows; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        int32_t s = d[i][0][h];
        if constexpr (P == 2) s = s * kQ8Fine + d[i][1][h];
        is[(i * NT + t) * kRwFs + 2 * lane + h] = __int2float_rn(s);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kRwRows; ++i) {
    dw[i * kRwFs + 2 * lane] = f16_bits(wd[i] & 0xFFFFu);
    dw[i * kRwFs + 2 * lane + 1] = f16_bits(wd[i] >> 16);
  }
}

template <GgmlType T, int NT>
__global__ void __launch_bounds__(kGvThreads, kRwBlocksPerSm)
    gemv_rows_kernel(const DecBatch bt, int64_t groups, const float* __restrict__ x,
                     int64_t x_stride, bool vec, bool early) {
  constexpr int P = T == GgmlType::Q8_0 ? 2 : 1;
  extern __shared__ uint4 rsm[];
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, wp = tid >> 5;
  const int64_t n_in = bt.w[0].n_in;  // the same for every matrix of the batch
  const int pairs = static_cast<int>(mm::q8_pairs(n_in));
  const int nb = static_cast<int>(n_in / 32);
  const int ds = 2 * pairs + 1;
  uint4* codes = rsm;                                                 // [NT][P][pairs][4]
  float* dxs = reinterpret_cast<float*>(codes + NT * P * pairs * 4);  // [NT][ds]
  float* is = dxs + NT * ds + wp * (kRwRows * NT + kRwRows) * kRwFs;  // this warp's isums
  float* dw = is + kRwRows * NT * kRwFs;                              // and scales
  const int npass = (pairs + kGvPass - 1) / kGvPass;
  const int64_t grid = gridDim.x, blk = blockIdx.x;
  const int64_t nsteps = (groups - blk + grid - 1) / grid * npass;
  // Step st: pass st % npass of group blk + st / npass * grid.
  const auto group_of = [&](int64_t st) { return blk + st / npass * grid; };

  uint4 wq[2][kRwRows][4];  // [step % 2][row][quad]
  uint32_t wd[2][kRwRows];
  auto fetch = [&](int bf, int64_t st) {
    const int k = static_cast<int>(st % npass) * kGvPass + lane;
    const bool ok = st < nsteps && k < pairs;
    const int64_t g = ok ? group_of(st) : 0;
    const int m = group_matrix(bt, g);
    DevW w = bt.w[0];
#pragma unroll
    for (int i = 1; i < kMaxMatmulBatch; ++i) {
      if (i == m) w = bt.w[i];
    }
    const int64_t r = (g - bt.first[m]) * kGvRows + wp * kRwRows;
#pragma unroll
    for (int i = 0; i < kRwRows; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        wq[bf][i][j] = ok ? PairLoader<T>::codes(w, r + i, k, j) : make_uint4(0u, 0u, 0u, 0u);
      }
      wd[bf][i] = ok ? PairLoader<T>::scales(w, r + i, k) : 0u;
    }
  };
  fetch(0, 0);  // weights only: before the wait (launch_pdl)
  fetch(1, 1);
  pdl_wait();
  if (early) pdl_trigger();  // else at exit (early_trigger)
  quantize_x<P, NT>(x, x_stride, vec, pairs, nb, codes, dxs, ds, tid);
  __syncthreads();

  const int fi = lane / NT, ft = lane % NT;  // the fold's row and token (lane < kRwRows * NT)
  float acc = 0.0f;
  for (int64_t st0 = 0; st0 < nsteps; st0 += 2) {
#pragma unroll
    for (int bf = 0; bf < 2; ++bf) {
      const int64_t st = st0 + bf;
      if (st < nsteps) {
        const int ps = static_cast<int>(st % npass), k = ps * kGvPass + lane;
        if (k < pairs) rows_pass<P, NT>(wq[bf], wd[bf], codes, pairs, k, is, dw, lane);
        fetch(bf, st + 2);
        __syncwarp();
        if (lane < kRwRows * NT) {
          const int b0 = 2 * kGvPass * ps;
          const int nbs = nb - b0 < 2 * kGvPass ? nb - b0 : 2 * kGvPass;
          const float* fis = is + lane * kRwFs;
          const float* fdw = dw + fi * kRwFs;
          const float* fdx = dxs + ft * ds + b0;
#pragma unroll 8
          for (int b = 0; b < nbs; ++b) acc = __fmaf_rn(fis[b], __fmul_rn(fdw[b], fdx[b]), acc);
        }
        if (ps == npass - 1) {  // the group's rows are done
          const int64_t g = group_of(st);
          const int m = group_matrix(bt, g);
          const int64_t r = (g - bt.first[m]) * kGvRows + wp * kRwRows + fi;
          if (lane < kRwRows * NT && r < bt.w[m].n_out) bt.y[m][ft * bt.y_stride[m] + r] = acc;
          acc = 0.0f;
        }
        __syncwarp();
      }
    }
  }
}

using RowsKernel = void (*)(const DecBatch, int64_t, const float*, int64_t, bool, bool);

template <GgmlType T>
RowsKernel rows_kernel(int32_t n_tok) {
  static constexpr RowsKernel k[] = {gemv_rows_kernel<T, 3>, gemv_rows_kernel<T, 4>,
                                     gemv_rows_kernel<T, 5>, gemv_rows_kernel<T, 6>,
                                     gemv_rows_kernel<T, 7>, gemv_rows_kernel<T, 8>};
  static_assert(sizeof(k) / sizeof(k[0]) == kRwMaxTok - kRwMinTok + 1);
  return n_tok >= kRwMinTok && n_tok <= kRwMaxTok ? k[n_tok - kRwMinTok] : nullptr;
}

RowsKernel rows_kernel(GgmlType t, int32_t n_tok) {
  return t == GgmlType::Q8_0 ? rows_kernel<GgmlType::Q8_0>(n_tok)
                             : rows_kernel<GgmlType::Q4_0>(n_tok);
}

// An attribute of the current device.
cudaError_t device_attr(cudaDeviceAttr attr, int* v) {
  int dev = 0;
  const cudaError_t e = cudaGetDevice(&dev);
  return e == cudaSuccess ? cudaDeviceGetAttribute(v, attr, dev) : e;
}

// Whether `kernel` may be launched with `smem` bytes of dynamic shared memory: at most 48 KB,
// or within the limit gemv_rows_setup (or an earlier launch outside a capture) raised it to.
cudaError_t smem_ok(RowsKernel kernel, size_t smem, cudaStream_t s, bool* ok) {
  *ok = smem <= kGvMaxSmem;
  if (*ok) return cudaSuccess;
  cudaFuncAttributes a{};
  cudaError_t e = cudaFuncGetAttributes(&a, kernel);
  if (e != cudaSuccess) return e;
  if (static_cast<size_t>(a.maxDynamicSharedSizeBytes) >= smem) {
    *ok = true;
    return cudaSuccess;
  }
  int optin = 0;
  e = device_attr(cudaDevAttrMaxSharedMemoryPerBlockOptin, &optin);
  if (e != cudaSuccess || smem > static_cast<size_t>(optin)) return e;
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  e = cudaStreamIsCapturing(s, &cs);
  if (e != cudaSuccess || cs != cudaStreamCaptureStatusNone) return e;
  e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(smem));
  *ok = e == cudaSuccess;
  return e;
}

}  // namespace

cudaError_t gemv_rows_setup() {
  int optin = 0;
  cudaError_t e = device_attr(cudaDevAttrMaxSharedMemoryPerBlockOptin, &optin);
  for (const GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    for (int32_t n = kRwMinTok; n <= kRwMaxTok && e == cudaSuccess; ++n) {
      e = cudaFuncSetAttribute(rows_kernel(t, n), cudaFuncAttributeMaxDynamicSharedMemorySize,
                               optin);
    }
  }
  return e;
}

bool rows_launch(cudaStream_t s, GgmlType t, const DecBatch& b, int64_t groups, const float* x,
                 int64_t x_stride, int32_t n_tok, bool vec, cudaError_t* err) {
  const RowsKernel kernel = rows_kernel(t, n_tok);
  if (kernel == nullptr) return false;
  const size_t smem = rows_smem(mm::q8_planes(t), n_tok, b.w[0].n_in);
  bool ok = false;
  cudaError_t e = smem_ok(kernel, smem, s, &ok);
  if (e == cudaSuccess && !ok) return false;  // decode_kernel takes it
  int per_sm = 0, sms = 0;
  if (e == cudaSuccess) {
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kGvThreads, smem);
  }
  if (e == cudaSuccess) e = device_attr(cudaDevAttrMultiProcessorCount, &sms);
  bool early = true;
  if (e == cudaSuccess) e = early_trigger(b, &early);
  if (e == cudaSuccess) {
    if (per_sm < 1) return false;
    const int64_t grid = std::min<int64_t>(groups, int64_t{sms} * std::min(per_sm, kRwBlocksPerSm));
    e = launch_pdl(kernel, dim3(static_cast<unsigned>(grid)), dim3(kGvThreads), smem, s, b, groups,
                   x, x_stride, vec, early);
  }
  *err = e;
  return true;
}

}  // namespace geist::cuda::q8
