// The one- and two-token GEMVs of the 8-bit path (Q8_0, Q4_0): the decode steps' matmuls and
// the fused gate / up + swiglu launch. The arithmetic is the one stated at the top of
// matmul_q8_cuda.cu, bitwise.
#include <algorithm>
#include <climits>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/gemv_q8_cuda.cuh"
#include "backends/cuda/launch_cuda.cuh"
#include "backends/cuda/matmul_common.cuh"
#include "backends/cuda/matmul_q8_cuda.cuh"
#include "backends/cuda/norm_cuda.cuh"

namespace geist::cuda {

namespace q8 {

// Whether the kernel after a GEMV streaming `bytes` of weights may launch while it runs
// (launch_pdl: pdl_trigger right after the wait; else each block triggers by exiting). The
// decode matmul after it then asks L2 for its own weights (prefetch_rest) early; past half the
// L2 this GEMV's stream evicts them before they are read, and the early blocks only compete for
// DRAM. H200 tg128: llama-1b's 35.6 MB gate / up + swiglu before its 17.8 MB down projection
// 1094-1101 tok/s triggered early, 1139-1148 at exit; qwen35-0.8b's 7.8 MB gate / up 978-996
// early, 943-947 at exit.
cudaError_t early_trigger(const DecBatch& b, bool* early) {
  size_t bytes = 0;
  for (int i = 0; i < b.n; ++i) bytes += b.w[i].row_bytes * static_cast<size_t>(b.w[i].n_out);
  int dev = 0, l2 = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev);
  *early = bytes <= static_cast<size_t>(l2) / 2;
  return e;
}

namespace {

using namespace mm;  // NOLINT(build/namespaces): the helpers shared with the prefill kernel

// float2 entries per row of the fold slices: [2 * kGvPass][nt] (block, token), padded by 16
// bytes so that rows start on different banks and stay 16-byte aligned.
__host__ __device__ constexpr int gv_fold_row(int nt) { return 2 * kGvPass * nt + 2; }

// Shared memory: the fold slices [warp][row][gv_fold_row], then the activation codes
// [nt][plane][pair][4] (uint4; quad q of pair k at quad (q + k / 2) % 4, see gemv_kernel),
// then the steps dx [nt][2 * pairs].
size_t gv_smem(int planes, int32_t nt, int64_t n_in) {
  const size_t pairs = static_cast<size_t>(q8_pairs(n_in)), t = static_cast<size_t>(nt);
  return kGvRows * static_cast<size_t>(gv_fold_row(nt)) * 8 + t * pairs * (64 * planes + 8);
}

// Asks L2 for the weight bytes of rows [r0, r0 + rows) past those of the first pass (which the
// lanes load into registers), so that the whole block's weights are on their way while the
// kernel ahead of a launch_pdl launch still runs. A hint only: no value depends on it.
template <GgmlType T>
__device__ __forceinline__ void prefetch_rest(const DevW& w, int64_t r0, int64_t rows, int tid) {
  constexpr int64_t kLine = 128;
  const int64_t stride = T == GgmlType::Q8_0 ? w.qrow : static_cast<int64_t>(w.row_bytes);
  const int64_t skip = T == GgmlType::Q8_0 ? 64 * kGvPass : 36 * kGvPass;  // pass 0's bytes
  if (stride <= skip) return;
  const int64_t nr = w.n_out - r0 < rows ? w.n_out - r0 : rows;
  const int64_t per = (stride - skip + kLine - 1) / kLine;  // lines per row
  for (int64_t i = tid; i < nr * per; i += kGvThreads) {
    const uint8_t* p = w.data + (r0 + i / per) * stride + skip + kLine * (i % per);
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
  }
}

// One pass of a warp: lane's pair k of its RW rows (weights wq, scales wd) against the codes;
// writes (float(isum_b), dw_b * dx_b) of blocks 2k, 2k + 1 for each row and token to the
// warp's fold slices fs [RW][FR] at [2 * lane][NT].
template <int P, int RW, int NT>
__device__ __forceinline__ void pass_pairs(const uint4 (&wq)[RW][4], const uint32_t (&wd)[RW],
                                           const uint4* codes, const float* dxs, int pairs, int k,
                                           float2* fs, int FR, int lane) {
  int32_t d[RW][NT][P][2];  // [row][token][plane][chunk 2k + h]
#pragma unroll
  for (int i = 0; i < RW; ++i) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
#pragma unroll
      for (int p = 0; p < P; ++p) d[i][t][p][0] = d[i][t][p][1] = 0;
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int quad = (j + (k >> 1)) & 3;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
#pragma unroll
      for (int p = 0; p < P; ++p) {
        const uint4 a = codes[((t * P + p) * pairs + k) * 4 + quad];
#pragma unroll
        for (int i = 0; i < RW; ++i) {
#pragma unroll
          for (int h = 0; h < 2; ++h) d[i][t][p][h] += dot16(wq[i][j], a, h);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < RW; ++i) {
    float2 f[2 * NT];  // [chunk 2k + h][token]: consecutive in the fold slice
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float dw = f16_bits(h == 0 ? wd[i] & 0xFFFFu : wd[i] >> 16);
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        int32_t is = d[i][t][0][h];
        if constexpr (P == 2) is = is * kQ8Fine + d[i][t][1][h];
        f[h * NT + t] =
            make_float2(__int2float_rn(is), __fmul_rn(dw, dxs[t * 2 * pairs + 2 * k + h]));
      }
    }
    float4* dst = reinterpret_cast<float4*>(fs + i * FR + 2 * lane * NT);
#pragma unroll
    for (int e = 0; e < NT; ++e) {
      dst[e] = make_float4(f[2 * e].x, f[2 * e].y, f[2 * e + 1].x, f[2 * e + 1].y);
    }
  }
}

// Folds one pass's blocks (at most 2 * kGvPass; the row's blocks from 2 * kGvPass * ps on) of a
// row and token from its fold slice f (entries NT apart) into acc, in block order.
__device__ __forceinline__ float fold_pass(const float2* f, int NT, int nb, int ps, float acc) {
  const int nbs = nb - 2 * kGvPass * ps < 2 * kGvPass ? nb - 2 * kGvPass * ps : 2 * kGvPass;
#pragma unroll 8
  for (int b = 0; b < nbs; ++b) {
    const float2 v = f[b * NT];
    acc = __fmaf_rn(v.x, v.y, acc);
  }
  return acc;
}

// The end of a warp's gate row r (lane 0's acc) and up row r (lane 1's) in the fused launch:
// both rows stored (the gate row unless sw_out is it), then sw_out[r] = swiglu_elem(gate, up)
// after the up row's store, so that sw_out may be either. Every lane of the warp calls it.
__device__ __forceinline__ void store_swiglu(const DecBatch& bt, float* sw_out, int64_t r,
                                             float acc, int lane) {
  const float up = __shfl_sync(0xffffffffu, acc, 1);
  const bool in = r < bt.w[0].n_out;
  if (lane == 1 && in) bt.y[1][r] = acc;
  __syncwarp();  // the up row is stored before out, which may be it
  if (lane == 0 && in) {
    if (bt.y[0] != sw_out) bt.y[0][r] = acc;
    sw_out[r] = swiglu_elem(acc, up);
  }
}

// SWG (matmul_swiglu, one token): bt holds the gate (0) and up (1) matrices; warp w of block b
// computes row 8 b + w of both (its rows 0 and 1), writes them to bt.y[1] and, unless sw_out is
// the gate rows, bt.y[0], and then sw_out[8 b + w] = swiglu_elem(gate, up) (after the up row's
// store, so that sw_out may be either).
template <GgmlType T, int NT, bool SWG>
__global__ void __launch_bounds__(kGvThreads, 3)
    gemv_kernel(const DecBatch bt, const float* __restrict__ x, int64_t x_stride, bool vec,
                bool early, float* sw_out) {
  constexpr int P = T == GgmlType::Q8_0 ? 2 : 1;
  constexpr int RW = kGvRowsPerWarp;
  constexpr int FR = gv_fold_row(NT);
  extern __shared__ uint4 gsm[];
  DevW w;
  float* y;
  int64_t y_stride, first;
  select_matrix(bt, &w, &y, &y_stride, &first);
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, wp = tid >> 5;
  const int pairs = static_cast<int>(q8_pairs(w.n_in));
  const int nb = static_cast<int>(w.n_in / 32);
  const int64_t rw0 = SWG ? static_cast<int64_t>(blockIdx.x) * kGvWarps + wp
                          : (static_cast<int64_t>(blockIdx.x) - first) * kGvRows + wp * RW;
  // Row i of the warp: matrix i at row rw0 (SWG), else row rw0 + i of w.
  const auto row_w = [&](int i) -> const DevW& { return SWG ? bt.w[i] : w; };
  const auto row_r = [&](int i) { return SWG ? rw0 : rw0 + i; };
  float2* fs = reinterpret_cast<float2*>(gsm) + wp * RW * FR;         // this warp's [RW][FR]
  uint4* codes = gsm + kGvRows * FR / 2;                              // [NT][P][pairs][4]
  float* dxs = reinterpret_cast<float*>(codes + NT * P * pairs * 4);  // [NT][2 * pairs]

  uint4 wq[RW][4];  // [row][quad]: the lane's pair of each row
  uint32_t wd[RW];  // [row]: the pair's two f16 scales
  auto fetch = [&](int k) {
#pragma unroll
    for (int i = 0; i < RW; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        wq[i][j] =
            k < pairs ? PairLoader<T>::codes(row_w(i), row_r(i), k, j) : make_uint4(0u, 0u, 0u, 0u);
      }
      wd[i] = k < pairs ? PairLoader<T>::scales(row_w(i), row_r(i), k) : 0u;
    }
  };
  fetch(lane);  // weights only: before the wait (launch_pdl)
  if constexpr (SWG) {
    static_assert(RW == 2 && NT == 1, "a warp holds one gate row and one up row");
    prefetch_rest<T>(bt.w[0], static_cast<int64_t>(blockIdx.x) * kGvWarps, kGvWarps, tid);
    prefetch_rest<T>(bt.w[1], static_cast<int64_t>(blockIdx.x) * kGvWarps, kGvWarps, tid);
  } else {
    prefetch_rest<T>(w, (static_cast<int64_t>(blockIdx.x) - first) * kGvRows, kGvRows, tid);
  }
  pdl_wait();
  if (early) pdl_trigger();  // else at exit (early_trigger)

  quantize_x<P, NT>(x, x_stride, vec, pairs, nb, codes, dxs, 2 * pairs, tid);
  __syncthreads();

  const int fi = lane / NT, ft = lane % NT;  // the fold's row and token (lane < RW * NT)
  float acc = 0.0f;
  const int npass = (pairs + kGvPass - 1) / kGvPass;
  for (int ps = 0; ps < npass; ++ps) {
    const int k = ps * kGvPass + lane;
    if (k < pairs) pass_pairs<P, RW, NT>(wq, wd, codes, dxs, pairs, k, fs, FR, lane);
    if (ps + 1 < npass) fetch(k + kGvPass);
    __syncwarp();
    if (lane < RW * NT) acc = fold_pass(fs + fi * FR + ft, NT, nb, ps, acc);
    __syncwarp();
  }
  if constexpr (SWG) {
    store_swiglu(bt, sw_out, rw0, acc, lane);
  } else if (lane < RW * NT && rw0 + fi < w.n_out) {
    y[ft * y_stride + rw0 + fi] = acc;
  }
}

// ---- GEMV of one large matrix, one token (the output projection, the large gate / up) ----
// gemv_kernel's arithmetic and fold (so the same bits), with blocks that stay: a grid of about
// two blocks per SM quantizes the activations once per block and walks the row groups
// blockIdx.x, blockIdx.x + gridDim.x, ...; a warp's (group, pass) steps form one stream in
// which the weights of the next two steps are in flight while a step is folded. For a matrix
// of thousands of row groups this saves the per-block quantization and the tail of each
// block's last pass (H200, 2048 x 128256 Q8_0: 86 -> 69 us, bench/cuda_gemv_speed.cu).
// The gate / up + swiglu launch walks its groups of kGvWarps rows the same way from
// kGsMinSwgGroups groups on (H200: llama-1b's 8192 rows, 1024 groups, 15.7 -> 13.9 us, tg128
// 1139-1163 -> 1164-1196 tok/s; qwen35-0.8b's 3584 rows, 448 groups, 5.6 -> 6.4 us: there
// gemv_kernel's three blocks per SM are ahead).
constexpr int kGsBlocksPerSm = 2;
constexpr int64_t kGsMinGroups = 2048;  // fewer row groups: gemv_kernel is as fast or faster
constexpr int64_t kGsMinSwgGroups = 512;

// SWG: the gate / up + swiglu launch (gemv_kernel's SWG rows: a group is kGvWarps rows, warp w
// takes gate row and up row 8 g + w); else a group is kGvRows rows of bt.w[0].
template <GgmlType T, bool SWG>
__global__ void __launch_bounds__(kGvThreads, kGsBlocksPerSm)
    gemv_stream_kernel(const DecBatch bt, const float* __restrict__ x, bool vec, bool early,
                       float* sw_out, int ngroups) {
  constexpr int P = T == GgmlType::Q8_0 ? 2 : 1;
  constexpr int RW = kGvRowsPerWarp;
  constexpr int FR = gv_fold_row(1);
  constexpr int kGroup = SWG ? kGvWarps : kGvRows;
  extern __shared__ uint4 gsm[];
  const DevW& w = bt.w[0];
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, wp = tid >> 5;
  const int pairs = static_cast<int>(q8_pairs(w.n_in));
  const int nb = static_cast<int>(w.n_in / 32);
  float2* fs = reinterpret_cast<float2*>(gsm) + wp * RW * FR;    // this warp's [RW][FR]
  uint4* codes = gsm + kGvRows * FR / 2;                         // [P][pairs][4]
  float* dxs = reinterpret_cast<float*>(codes + P * pairs * 4);  // [2 * pairs]
  const int npass = (pairs + kGvPass - 1) / kGvPass;
  const int grid = static_cast<int>(gridDim.x), blk = static_cast<int>(blockIdx.x);
  const int nsteps = (ngroups - blk + grid - 1) / grid * npass;
  // The first of the warp's rows in step st's group (row i: + i, or matrix i for SWG).
  const auto row0 = [&](int st) {
    return static_cast<int64_t>(blk + st / npass * grid) * kGroup + (SWG ? wp : wp * RW);
  };
  uint4 wq[2][RW][4];  // [step % 2][row][quad]
  uint32_t wd[2][RW];
  auto fetch = [&](int bf, int st) {
    const int k = st % npass * kGvPass + lane;
    const bool ok = st < nsteps && k < pairs;
    const int64_t r = row0(st);
#pragma unroll
    for (int i = 0; i < RW; ++i) {
      const DevW& wi = bt.w[SWG ? i : 0];
      const int64_t ri = SWG ? r : r + i;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        wq[bf][i][j] = ok ? PairLoader<T>::codes(wi, ri, k, j) : make_uint4(0u, 0u, 0u, 0u);
      }
      wd[bf][i] = ok ? PairLoader<T>::scales(wi, ri, k) : 0u;
    }
  };
  fetch(0, 0);  // weights only: before the wait (launch_pdl)
  fetch(1, 1);
  pdl_wait();
  if (early) pdl_trigger();  // else at exit (early_trigger)
  quantize_x<P, 1>(x, 0, vec, pairs, nb, codes, dxs, 2 * pairs, tid);
  __syncthreads();
  float acc = 0.0f;
  for (int st0 = 0; st0 < nsteps; st0 += 2) {
#pragma unroll
    for (int bf = 0; bf < 2; ++bf) {
      const int st = st0 + bf;
      if (st < nsteps) {
        const int ps = st % npass, k = ps * kGvPass + lane;
        if (k < pairs) pass_pairs<P, RW, 1>(wq[bf], wd[bf], codes, dxs, pairs, k, fs, FR, lane);
        fetch(bf, st + 2);
        __syncwarp();
        if (lane < RW) acc = fold_pass(fs + lane * FR, 1, nb, ps, acc);
        if (ps == npass - 1) {  // the group's rows are done
          const int64_t r = row0(st);
          if constexpr (SWG) {
            store_swiglu(bt, sw_out, r, acc, lane);
          } else if (lane < RW && r + lane < w.n_out) {
            bt.y[0][r + lane] = acc;
          }
          acc = 0.0f;
        }
        __syncwarp();
      }
    }
  }
}

// gemv_stream_kernel's grid for `groups` row groups: kGsBlocksPerSm blocks per SM, or fewer.
cudaError_t stream_grid(int64_t groups, int64_t* grid) {
  int dev = 0, sms = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  *grid = std::min<int64_t>(groups, int64_t{sms} * kGsBlocksPerSm);
  return e;
}

template <GgmlType T>
cudaError_t launch_gemv(cudaStream_t s, const DecBatch& b, int64_t blocks, const float* x,
                        int64_t x_stride, int32_t n_tok, bool vec) {
  const size_t smem = gv_smem(q8_planes(T), n_tok, b.w[0].n_in);
  if (T == GgmlType::Q8_0 && b.n == 1 && n_tok == 1 && blocks >= kGsMinGroups) {
    int64_t grid = 0;
    const cudaError_t e = stream_grid(blocks, &grid);
    if (e != cudaSuccess) return e;
    return launch_pdl(gemv_stream_kernel<T, false>, dim3(static_cast<unsigned>(grid)),
                      dim3(kGvThreads), smem, s, b, x, vec, true, static_cast<float*>(nullptr),
                      static_cast<int>(blocks));
  }
  bool early = true;
  const cudaError_t e = early_trigger(b, &early);
  if (e != cudaSuccess) return e;
  auto* kernel = n_tok == 1 ? &gemv_kernel<T, 1, false> : &gemv_kernel<T, 2, false>;
  return launch_pdl(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kGvThreads), smem, s, b, x,
                    x_stride, vec, early, static_cast<float*>(nullptr));
}

template <GgmlType T>
cudaError_t launch_swiglu(cudaStream_t s, const MatmulOut& gate, const MatmulOut& up,
                          const float* x, float* out) {
  DecBatch b{};
  b.n = 2;
  b.w[0] = dev_w(gate.w);
  b.w[1] = dev_w(up.w);
  b.y[0] = gate.y;
  b.y[1] = up.y;
  b.first[1] = INT64_MAX;  // every block selects the gate matrix's sizes (both the same)
  const int64_t blocks = (gate.w.n_out + kGvWarps - 1) / kGvWarps;
  if (blocks > 0x7fffffff) return cudaErrorInvalidConfiguration;
  const bool vec = reinterpret_cast<uintptr_t>(x) % 16 == 0;
  bool early = true;
  cudaError_t e = early_trigger(b, &early);
  if (e != cudaSuccess) return e;
  const size_t smem = gv_smem(q8_planes(T), 1, gate.w.n_in);
  if (blocks >= kGsMinSwgGroups) {
    int64_t grid = 0;
    e = stream_grid(blocks, &grid);
    if (e != cudaSuccess) return e;
    return launch_pdl(gemv_stream_kernel<T, true>, dim3(static_cast<unsigned>(grid)),
                      dim3(kGvThreads), smem, s, b, x, vec, early, out, static_cast<int>(blocks));
  }
  return launch_pdl(gemv_kernel<T, 1, true>, dim3(static_cast<unsigned>(blocks)), dim3(kGvThreads),
                    smem, s, b, x, gate.w.n_in, vec, early, out);
}

}  // namespace

bool gemv_launch(cudaStream_t s, GgmlType t, const DecBatch& b, int64_t blocks, const float* x,
                 int64_t x_stride, int32_t n_tok, bool vec, cudaError_t* err) {
  if (n_tok > 2 || gv_smem(q8_planes(t), n_tok, b.w[0].n_in) > kGvMaxSmem) return false;
  *err = t == GgmlType::Q8_0 ? launch_gemv<GgmlType::Q8_0>(s, b, blocks, x, x_stride, n_tok, vec)
                             : launch_gemv<GgmlType::Q4_0>(s, b, blocks, x, x_stride, n_tok, vec);
  return true;
}

}  // namespace q8

using mm::q8_planes;
using q8::kGvMaxSmem;

bool matmul_swiglu_ok(const WeightMatrix& gate, const WeightMatrix& up) {
  return matmul_batchable(gate, 1) && gate.type == up.type && gate.n_in == up.n_in &&
         gate.n_out == up.n_out && q8::gv_smem(q8_planes(gate.type), 1, gate.n_in) <= kGvMaxSmem;
}

cudaError_t matmul_swiglu(cudaStream_t s, const MatmulOut& gate, const MatmulOut& up,
                          const float* x, float* out) {
  if (!matmul_swiglu_ok(gate.w, up.w)) return cudaErrorInvalidValue;
  return gate.w.type == GgmlType::Q8_0 ? q8::launch_swiglu<GgmlType::Q8_0>(s, gate, up, x, out)
                                       : q8::launch_swiglu<GgmlType::Q4_0>(s, gate, up, x, out);
}

}  // namespace geist::cuda
