// The chunked gated delta rule on the GPU; see deltanet_chunk_cuda.h for the algorithm and
// kernels/deltanet.cpp (gated_delta_rule_chunked_reference) for the derivation it mirrors.
// Launched with launch_pdl (launch_cuda.cuh): every kernel starts with pdl_begin().
#include <algorithm>

#include "backends/cuda/deltanet_chunk_cuda.h"
#include "backends/cuda/launch_cuda.cuh"
#include "base/status.h"

namespace geist::cuda {
namespace {

constexpr int kC = kDeltaChunk;  // tokens per chunk
constexpr int kTs = kC + 1;      // row stride of the [kC][kC] shared matrices (bank spread)
constexpr int kPrepThreads = 256;
constexpr int kScanThreads = 256;  // 64 token rows x 4 column quads
constexpr int kScanCols = 16;      // state columns per scan block
constexpr int kScanStride = kScanCols + 1;
// Scratch of one pass is capped (the state is carried through f32 between passes).
constexpr size_t kMaxPassBytes = size_t{64} << 20;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Doubles of one (chunk, value head) record of scratch:
//   wt [d_k][kC]  W^T, W = T diag(beta e^G) K
//   qt [d_k][kC]  (e^G Q)^T
//   kd [kC][d_k]  e^{G_last - G_j} k_j
//   u  [kC][d_v]  T diag(beta) V
//   pt [kC][kC]   P^T, P[i][j] = e^{G_i-G_j} q_i.k_j for j <= i, 0 above
//   el [2]        e^{G_last} (and padding)
int64_t record_doubles(int32_t dk, int32_t dv) {
  return 3 * int64_t{kC} * dk + int64_t{kC} * dv + int64_t{kC} * kC + 2;
}

// Row stride (floats) of the staged key / query rows: d_k rounded up to 4 (zero padded) plus 4,
// so rows are float4-aligned and lanes reading rows j = 0..7 hit distinct banks.
__host__ __device__ int32_t key_stride(int32_t dk) { return (dk + 3) / 4 * 4 + 4; }

size_t prep_smem_bytes(int32_t dk) {
  return (5 * kC + 2 * kC * kTs) * sizeof(double) + 2 * size_t{kC} * key_stride(dk) * sizeof(float);
}

size_t scan_smem_bytes(int32_t dk) {
  return (static_cast<size_t>(dk) * kScanStride + size_t{kC} * kScanCols) * sizeof(double);
}

int64_t chunks_per_pass(const GatedDeltaArgs& a) {
  const int64_t n_chunks = ceil_div(a.n_tokens, kC);
  const int64_t per_chunk =
      int64_t{a.n_v_heads} * record_doubles(a.d_k, a.d_v) * static_cast<int64_t>(sizeof(double));
  return std::max<int64_t>(1, std::min<int64_t>(n_chunks, kMaxPassBytes / per_chunk));
}

// Block (chunk c, value head h) = blockIdx.x = c * n_v_heads + h over chunks [c0, c0 + grid).
__global__ void __launch_bounds__(kPrepThreads)
    chunk_prep_kernel(GatedDeltaArgs a, int64_t c0, double* scratch, int64_t rec) {
  pdl_begin();
  extern __shared__ double sm[];
  const int32_t dk = a.d_k, dv = a.d_v, ks = key_stride(a.d_k), dk4 = (dk + 3) / 4;
  double* gc = sm;             // [kC] G_i, cumulative log decay within the chunk
  double* eg = gc + kC;        // [kC] e^{G_i}
  double* bt = eg + kC;        // [kC] beta_i
  double* dl = bt + kC;        // [kC] e^{G_last - G_i}
  double* be = dl + kC;        // [kC] beta_i e^{G_i}
  double* am = be + kC;        // [kC][kTs] A, strictly lower
  double* tm = am + kC * kTs;  // [kC][kTs] T = (I + A)^-1, lower (upper part never read)
  float* kf = reinterpret_cast<float*>(tm + kC * kTs);  // [kC][ks] keys of the chunk, 0-padded
  float* qf = kf + kC * ks;                             // [kC][ks] queries, 0-padded

  const int32_t nv = a.n_v_heads;
  const int32_t h = static_cast<int32_t>(blockIdx.x % nv);
  const int64_t cl = blockIdx.x / nv;  // chunk within the pass
  const int64_t t0 = (c0 + cl) * kC;
  const int32_t len = static_cast<int32_t>(a.n_tokens - t0 < kC ? a.n_tokens - t0 : kC);
  const int32_t kh = h % a.n_k_heads;
  const int tid = threadIdx.x;
  double* wt = scratch + (cl * nv + h) * rec;
  double* qt = wt + int64_t{dk} * kC;
  double* kd = qt + int64_t{dk} * kC;
  double* u = kd + int64_t{kC} * dk;
  double* pt = u + int64_t{kC} * dv;
  double* el = pt + kC * kC;

  if (tid == 0) {
    double sum = 0.0;  // the CPU's order: a running double sum of the f32 gates
    for (int32_t i = 0; i < len; ++i) {
      sum += a.g[(t0 + i) * nv + h];
      gc[i] = sum;
    }
  }
  for (int32_t idx = tid; idx < kC * ks; idx += kPrepThreads) {
    const int32_t i = idx / ks, r = idx % ks;
    const bool in = i < len && r < dk;
    kf[idx] = in ? a.k[(t0 + i) * a.k_stride + int64_t{kh} * dk + r] : 0.0f;
    qf[idx] = in ? a.q[(t0 + i) * a.q_stride + int64_t{kh} * dk + r] : 0.0f;
  }
  __syncthreads();
  if (tid < len) {
    eg[tid] = exp(gc[tid]);
    bt[tid] = a.beta[(t0 + tid) * nv + h];
    dl[tid] = exp(gc[len - 1] - gc[tid]);
    be[tid] = bt[tid] * eg[tid];
  }
  if (tid == 0) el[0] = exp(gc[len - 1]);
  // Masked products; lanes take consecutive j, so the kf rows they read sit in distinct banks.
  for (int32_t idx = tid; idx < kC * kC; idx += kPrepThreads) {
    const int32_t i = idx / kC, j = idx % kC;
    double pv = 0.0, av = 0.0;
    if (i < len && j <= i) {
      const float4* ki = reinterpret_cast<const float4*>(kf + i * ks);
      const float4* kj = reinterpret_cast<const float4*>(kf + j * ks);
      const float4* qi = reinterpret_cast<const float4*>(qf + i * ks);
      double dkk = 0.0, dqk = 0.0;  // the zero padding adds exact zeros
      for (int32_t r = 0; r < dk4; ++r) {
        const float4 x = kj[r], y = ki[r], z = qi[r];
        dkk += double{y.x} * x.x;
        dqk += double{z.x} * x.x;
        dkk += double{y.y} * x.y;
        dqk += double{z.y} * x.y;
        dkk += double{y.z} * x.z;
        dqk += double{z.z} * x.z;
        dkk += double{y.w} * x.w;
        dqk += double{z.w} * x.w;
      }
      const double d = exp(gc[i] - gc[j]);
      pv = d * dqk;
      if (j < i) av = double{a.beta[(t0 + i) * nv + h]} * d * dkk;
    }
    pt[j * kC + i] = pv;
    am[i * kTs + j] = av;
  }
  __syncthreads();
  // T = (I + A)^-1, one column per thread: T[i][c] = -sum_{c<=j<i} A[i][j] T[j][c]. Four
  // accumulators in a fixed assignment shorten the dependent chain.
  if (tid < len) {
    const int32_t c = tid;
    tm[c * kTs + c] = 1.0;
    for (int32_t i = c + 1; i < len; ++i) {
      const double* ai = am + i * kTs;
      double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
      int32_t j = c;
      for (; j + 3 < i; j += 4) {
        s0 += ai[j] * tm[j * kTs + c];
        s1 += ai[j + 1] * tm[(j + 1) * kTs + c];
        s2 += ai[j + 2] * tm[(j + 2) * kTs + c];
        s3 += ai[j + 3] * tm[(j + 3) * kTs + c];
      }
      for (; j < i; ++j) s0 += ai[j] * tm[j * kTs + c];
      tm[i * kTs + c] = -((s0 + s1) + (s2 + s3));
    }
  }
  __syncthreads();
  // W^T and (e^G Q)^T: lanes take consecutive tokens i (coalesced stores), a thread four
  // key rows r (one float4 of each key).
  for (int32_t idx = tid; idx < dk4 * kC; idx += kPrepThreads) {
    const int32_t r4 = idx / kC, i = idx % kC;
    if (i >= len) continue;
    const double* ti = tm + i * kTs;
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll 4
    for (int32_t j = 0; j <= i; ++j) {
      const double t = ti[j] * be[j];
      const float4 kv = reinterpret_cast<const float4*>(kf + j * ks)[r4];
      acc[0] += t * kv.x;
      acc[1] += t * kv.y;
      acc[2] += t * kv.z;
      acc[3] += t * kv.w;
    }
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int32_t r = r4 * 4 + c;
      if (r < dk) {
        wt[r * kC + i] = acc[c];
        qt[r * kC + i] = eg[i] * qf[i * ks + r];
      }
    }
  }
  for (int32_t idx = tid; idx < len * dk; idx += kPrepThreads) {
    const int32_t j = idx / dk, r = idx % dk;
    kd[idx] = dl[j] * kf[j * ks + r];
  }
  // U = T diag(beta) V: lanes take consecutive tokens i, a thread four value columns (the
  // v loads are then the same four addresses for the whole warp).
  const float* vh = a.v + t0 * a.v_stride + int64_t{h} * dv;
  const int32_t dv4 = (dv + 3) / 4;
  for (int32_t idx = tid; idx < dv4 * kC; idx += kPrepThreads) {
    const int32_t c4 = (idx / kC) * 4, i = idx % kC;
    if (i >= len) continue;
    const double* ti = tm + i * kTs;
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll 4
    for (int32_t j = 0; j <= i; ++j) {
      const double t = ti[j] * bt[j];
      const float* vj = vh + j * a.v_stride + c4;
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[c] += t * (c4 + c < dv ? vj[c] : 0.0f);
    }
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      if (c4 + c < dv) u[int64_t{i} * dv + c4 + c] = acc[c];
    }
  }
}

// Block (value head h, column tile) = blockIdx.x = h * col_tiles + tile, columns
// [tile * kScanCols, +kScanCols), over chunks [c0, c0 + n_chunks) in order.
__global__ void __launch_bounds__(kScanThreads)
    chunk_scan_kernel(GatedDeltaArgs a, int64_t c0, int64_t n_chunks, const double* scratch,
                      int64_t rec, int32_t col_tiles) {
  pdl_begin();
  extern __shared__ double sm[];
  const int32_t dk = a.d_k, dv = a.d_v, nv = a.n_v_heads;
  double* s = sm;                              // [dk][kScanStride] state tile S[:, cols]
  double* up = s + int64_t{dk} * kScanStride;  // [kC][kScanCols] U' of the chunk
  const int32_t h = static_cast<int32_t>(blockIdx.x) / col_tiles;
  const int32_t col0 = (static_cast<int32_t>(blockIdx.x) % col_tiles) * kScanCols;
  float* st = a.state + int64_t{h} * dk * dv;  // [dk][dv]
  const int tid = threadIdx.x;
  for (int32_t idx = tid; idx < dk * kScanCols; idx += kScanThreads) {
    const int32_t r = idx / kScanCols, c = idx % kScanCols, col = col0 + c;
    s[r * kScanStride + c] = col < dv ? double{st[int64_t{r} * dv + col]} : 0.0;
  }
  const int32_t i = tid >> 2;        // token row of the chunk
  const int32_t cq = (tid & 3) * 4;  // first of this thread's four columns
  for (int64_t cl = 0; cl < n_chunks; ++cl) {
    __syncthreads();  // s complete; the previous chunk's up fully consumed
    const int64_t t0 = (c0 + cl) * kC;
    const int32_t len = static_cast<int32_t>(a.n_tokens - t0 < kC ? a.n_tokens - t0 : kC);
    const double* wt = scratch + (cl * nv + h) * rec;
    const double* qt = wt + int64_t{dk} * kC;
    const double* kd = qt + int64_t{dk} * kC;
    const double* u = kd + int64_t{kC} * dk;
    const double* pt = u + int64_t{kC} * dv;
    const double e_last = pt[kC * kC];
    double ao[4] = {0.0, 0.0, 0.0, 0.0};
    if (i < len) {
      double au[4] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll 8
      for (int32_t r = 0; r < dk; ++r) {
        const double w = __ldg(wt + r * kC + i), q = __ldg(qt + r * kC + i);
        const double* sr = s + r * kScanStride + cq;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          au[c] += w * sr[c];
          ao[c] += q * sr[c];
        }
      }
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int32_t col = col0 + cq + c;
        up[i * kScanCols + cq + c] = (col < dv ? u[int64_t{i} * dv + col] : 0.0) - au[c];
      }
    }
    __syncthreads();  // up complete; every read of s for this chunk done
    if (i < len) {
#pragma unroll 8
      for (int32_t j = 0; j <= i; ++j) {
        const double p = __ldg(pt + j * kC + i);
#pragma unroll
        for (int c = 0; c < 4; ++c) ao[c] += p * up[j * kScanCols + cq + c];
      }
      float* o = a.out + (t0 + i) * a.out_stride + int64_t{h} * dv;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int32_t col = col0 + cq + c;
        if (col < dv) o[col] = static_cast<float>(ao[c]);
      }
    }
    // State update: lanes take consecutive key rows r (coalesced kd reads, distinct banks).
    for (int32_t idx = tid; idx < dk * (kScanCols / 4); idx += kScanThreads) {
      const int32_t r = idx % dk, g4 = (idx / dk) * 4;
      double* sr = s + r * kScanStride + g4;
      double acc[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[c] = e_last * sr[c];
#pragma unroll 8
      for (int32_t j = 0; j < len; ++j) {
        const double kv = __ldg(kd + int64_t{j} * dk + r);
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[c] += kv * up[j * kScanCols + g4 + c];
      }
#pragma unroll
      for (int c = 0; c < 4; ++c) sr[c] = acc[c];
    }
  }
  __syncthreads();
  for (int32_t idx = tid; idx < dk * kScanCols; idx += kScanThreads) {
    const int32_t r = idx / kScanCols, c = idx % kScanCols, col = col0 + c;
    if (col < dv) st[int64_t{r} * dv + col] = static_cast<float>(s[r * kScanStride + c]);
  }
}

}  // namespace

bool delta_chunked_applies(const GatedDeltaArgs& a) {
  return a.n_tokens > 1 && a.d_k >= 1 && a.d_k <= kDeltaChunkMaxDk && a.d_v >= 1;
}

size_t delta_chunked_scratch_bytes(const GatedDeltaArgs& a) {
  if (!delta_chunked_applies(a)) return 0;
  return static_cast<size_t>(chunks_per_pass(a) * a.n_v_heads * record_doubles(a.d_k, a.d_v)) *
         sizeof(double);
}

void delta_chunked(cudaStream_t s, const GatedDeltaArgs& a, void* scratch) {
  GEIST_CHECK(
      delta_chunked_applies(a) && a.n_k_heads >= 1 && a.n_v_heads >= 1 && scratch != nullptr,
      "delta_chunked: bad shape or no scratch");
  auto* sc = static_cast<double*>(scratch);
  const int64_t rec = record_doubles(a.d_k, a.d_v);
  const int64_t n_chunks = ceil_div(a.n_tokens, kC);
  const int64_t per_pass = chunks_per_pass(a);
  const int32_t col_tiles = static_cast<int32_t>(ceil_div(a.d_v, kScanCols));
  const size_t prep_smem = prep_smem_bytes(a.d_k);
  const size_t scan_smem = scan_smem_bytes(a.d_k);
  // Above the 48 KiB default the kernels must opt in (sm_90 allows up to 227 KiB).
  cudaFuncSetAttribute(chunk_prep_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       static_cast<int>(prep_smem));
  if (scan_smem > 48 * 1024) {
    cudaFuncSetAttribute(chunk_scan_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(scan_smem));
  }
  for (int64_t c0 = 0; c0 < n_chunks; c0 += per_pass) {
    const int64_t nc = std::min(per_pass, n_chunks - c0);
    const int64_t prep_blocks = nc * a.n_v_heads;
    const int64_t scan_blocks = int64_t{a.n_v_heads} * col_tiles;
    GEIST_CHECK(prep_blocks <= 0x7fffffff && scan_blocks <= 0x7fffffff,
                "delta_chunked: too many blocks");
    launch_pdl(chunk_prep_kernel, dim3(static_cast<unsigned>(prep_blocks)), dim3(kPrepThreads),
               prep_smem, s, a, c0, sc, rec);
    launch_pdl(chunk_scan_kernel, dim3(static_cast<unsigned>(scan_blocks)), dim3(kScanThreads),
               scan_smem, s, a, c0, nc, static_cast<const double*>(sc), rec, col_tiles);
  }
}

}  // namespace geist::cuda
