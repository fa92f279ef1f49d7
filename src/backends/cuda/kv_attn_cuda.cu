// F16 / F32 caches with heads of 64, 128 or 256 take the tensor-core kernel instead, for every
// call (kv_attn_mma_cuda.cu, its own per-row arithmetic); everything else runs here.
//
// Causal grouped-query attention over KV bytes in any KvCache encoding, tiled (flash-attention
// style): a block takes kRows query rows (up to kRows / group tokens times the query heads of
// one kv head) and walks the keys in tiles of kKeys positions, each tile decoded once into
// shared memory (coalesced: consecutive threads read consecutive bytes of a row) and used by
// all the block's rows.
//
// Per-row arithmetic, the same whatever block, n_tok or pos0 the row is computed in:
//   for each key tile [j0, j0 + kKeys), j0 = 0, kKeys, ... (absolute positions):
//     s_j  = (sum over d in index order of q_d * k_jd, FMAs from 0) * scale, -inf past the
//            row's position (causal) -- q and k in the rotated domain for Q8 / Q8A / Q4 keys
//     m'   = max(m, max_j s_j);  alpha = exp(m - m');  p_j = exp(s_j - m')
//     l    = l * alpha + (sum over j in order of p_j)       (one FMA)
//     acc  = acc * alpha, then acc = fma(p_j, v_j, acc) for j in order
//   out = acc / l (rotated V: acc rotated back per block first).
// A tile wholly past the row's position changes nothing bitwise (alpha = 1, p_j = 0), so the
// extra tiles a block walks for its later rows leave its earlier rows as a shorter walk would.
//
// Keys relative to a reference (q4, KvKeyRef): q . R_p c joins the score as n_rot + 1 extra
// channels, query side (q_a c_a + q_b c_b, q_b c_a - q_a c_b) per rotated pair and q . c over
// the head's other channels, key side (cos, sin) per pair of position p and 1 (0 for the
// positions past the split, whose keys are absolute). Rows of an unrotated hi segment next to
// a rotated lo (q4's f16 window) are rotated into the tile, so one domain serves both.
#include <cuda_runtime.h>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/kv_attn_mma_cuda.h"
#include "backends/cuda/kv_codec_cuda.cuh"

namespace geist::cuda {

namespace {

using namespace kvdev;

constexpr int kThreads = 128;
constexpr int kFewRows = kThreads / 32;  // FEW: live rows, one per compute warp
constexpr int kFewThreads = 4 * kThreads;
constexpr int kRows = 32;  // query rows per block
constexpr int kKeys = 32;  // key positions per tile
constexpr int kMaxHd = 256;
constexpr size_t kMaxSmem = 200 * 1024;  // sm_90 allows 227 KB per block

struct AttnArgs {
  int32_t n_head_kv, group, hd_k, hd_v;
  float scale;
  const float* q;
  int64_t q_stride;
  int32_t n_tok, pos0;
  const int32_t* pos_dev;  // nullptr, or a device int32 added to pos0 (a replayed graph step)
  int32_t nq;              // query heads of one kv head per block (<= kRows)
  int32_t qt;              // tokens per block (kRows / nq)
  int32_t rot_k;           // rotation block of K (0: not rotated)
  int32_t rot_v;           // rotation block of V (0: not rotated)
  int32_t n_corr;          // extra score channels for a key reference: n_rot + 1 (0: none)
  int32_t wk;  // widest K slice read over all kv heads, plus n_corr (shared-memory row length)
  int32_t wv;  // likewise for V
  KvDevSrc k, v;
  float* out;
  int64_t out_stride;
};

size_t smem_floats(int32_t wk, int32_t wv) {
  const int32_t ldq = wk + 1;
  const int32_t ldk = ldq > wv ? ldq : wv;  // the K tile area is reused for the output
  return static_cast<size_t>(kRows) * ldq + static_cast<size_t>(kKeys) * ldk +
         static_cast<size_t>(kKeys) * wv + static_cast<size_t>(kRows) * (kKeys + 1) + 2 * kRows;
}

// The channels kv head g reads: its slice [g * hd, (g + 1) * hd), widened to whole blocks of
// `block` when rows are rotated (block 0: the slice itself). skip: slice start in the cover.
struct Cover {
  int32_t c0, width, skip;
};
__host__ __device__ inline Cover cover_of(int32_t g, int32_t hd, int32_t block) {
  const int32_t b = block > 0 ? block : 1;
  const int32_t lo = g * hd / b * b, hi = (g * hd + hd + b - 1) / b * b;
  return {lo, hi - lo, g * hd - lo};
}

// dst[j][d] = channel c0 + d of position j0 + j (0 past last_pos), j < kKeys, d < width.
// Each thread's kFill elements of a round are loaded before any is stored, so a tile costs a
// few memory latencies rather than one per element.
constexpr int kFill = 8;
__device__ __forceinline__ void fill_tile(float* dst, int32_t ld, const KvDevSrc& src, int32_t j0,
                                          int32_t last_pos, int32_t c0, int32_t width) {
  const int total = kKeys * width;
  const int nth = static_cast<int>(blockDim.x);
  for (int e0 = static_cast<int>(threadIdx.x); e0 < total; e0 += nth * kFill) {
    float v[kFill];
#pragma unroll
    for (int u = 0; u < kFill; ++u) {
      const int e = e0 + u * nth;
      const int j = e / width, d = e % width;
      v[u] = e < total && j0 + j <= last_pos ? src_elem(src, j0 + j, c0 + d) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kFill; ++u) {
      const int e = e0 + u * nth;
      if (e < total) dst[(e / width) * ld + e % width] = v[u];
    }
  }
}

// NDV: output dims per lane (hd_v <= 32 * NDV). FEW: at most kFewRows query rows are live
// (decode): then 4x the threads load the tiles, a thread computes one score, and warp w
// accumulates row w alone; whoever computes them, every score, sum and accumulator takes
// the same operations in the same order as in the general mapping.
template <int NDV, bool FEW>
__global__ void __launch_bounds__(FEW ? kFewThreads : kThreads) flash_kernel(const AttnArgs a) {
  constexpr int RW = FEW ? 1 : 8;                 // rows a warp accumulates: warp * RW + i
  constexpr int kOwned = FEW ? kFewRows : kRows;  // rows some warp accumulates
  const int nth = static_cast<int>(blockDim.x);
  extern __shared__ float smem[];
  const int32_t ldq = a.wk + 1;  // odd stride: the rows a warp reads sit in distinct banks
  const int32_t ldk = ldq > a.wv ? ldq : a.wv;
  const int32_t ldv = a.wv;
  float* sQ = smem;                          // [kRows][ldq] queries (rotated for rotated K)
  float* sK = sQ + kRows * ldq;              // [kKeys][ldq] key tile; at the end [kRows][ldv] out
  float* sV = sK + kKeys * ldk;              // [kKeys][ldv] value tile
  float* sP = sV + kKeys * ldv;              // [kRows][kKeys + 1] scores, then probabilities
  float* sAlpha = sP + kRows * (kKeys + 1);  // [kRows]
  float* sL = sAlpha + kRows;                // [kRows]
  const int tid = threadIdx.x;
  const int32_t g = static_cast<int32_t>(blockIdx.y);
  const int32_t h0 = static_cast<int32_t>(blockIdx.z) * a.nq;  // first head of the chunk
  const int32_t h_first = g * a.group + h0;  // query head of the rows with r % nq == 0
  const int32_t t0 = static_cast<int32_t>(blockIdx.x) * a.qt;
  const int32_t n_tok_blk = a.n_tok - t0 < a.qt ? a.n_tok - t0 : a.qt;
  const int32_t nq_blk = a.group - h0 < a.nq ? a.group - h0 : a.nq;
  const int32_t pos0 = a.pos_dev != nullptr ? a.pos0 + *a.pos_dev : a.pos0;
  const int32_t last_pos = pos0 + t0 + n_tok_blk - 1;
  const auto row_ok = [&](int r) { return r / a.nq < n_tok_blk && r % a.nq < nq_blk; };
  const auto row_pos = [&](int r) { return pos0 + t0 + r / a.nq; };
  // Rotated rows are read in whole blocks: the query is zero outside its slice, so the extra
  // channels (another head's) add nothing to a score, and the output takes the slice back out.
  const Cover ck = cover_of(g, a.hd_k, a.rot_k), cv = cover_of(g, a.hd_v, a.rot_v);
  const int32_t wq = ck.width + a.n_corr;  // score channels: the K slice, then the reference's

  for (int e = tid; e < kRows * ck.width; e += nth) {
    const int r = e / ck.width, d = e % ck.width - ck.skip;
    float x = 0.0f;
    if (row_ok(r) && d >= 0 && d < a.hd_k) {
      const int64_t t = t0 + r / a.nq;
      x = a.q[t * a.q_stride + static_cast<int64_t>(h_first + r % a.nq) * a.hd_k + d];
    }
    sQ[r * ldq + e % ck.width] = x;
  }
  if (a.n_corr > 0) {
    const KvKeyRef& rf = a.k.ref;
    const int32_t half = rf.n_rot / 2, stride_pair = rf.neox ? 1 : 2, second = rf.neox ? half : 1;
    const int32_t c0 = g * a.hd_k;  // the head's first channel in c
    for (int e = tid; e < kRows * (half + 1); e += nth) {
      const int r = e / (half + 1), i = e % (half + 1);
      float u = 0.0f, w = 0.0f;
      if (row_ok(r)) {
        const float* qr = a.q + static_cast<int64_t>(t0 + r / a.nq) * a.q_stride +
                          static_cast<int64_t>(h_first + r % a.nq) * a.hd_k;
        if (i < half) {
          const int32_t ia = i * stride_pair, ib = ia + second;
          const float ca = half_at(rf.c + 2 * (c0 + ia)), cb = half_at(rf.c + 2 * (c0 + ib));
          u = __fadd_rn(__fmul_rn(qr[ia], ca), __fmul_rn(qr[ib], cb));
          w = __fsub_rn(__fmul_rn(qr[ib], ca), __fmul_rn(qr[ia], cb));
        } else {
          for (int32_t d = rf.n_rot; d < a.hd_k; ++d) {
            u = __fmaf_rn(qr[d], half_at(rf.c + 2 * (c0 + d)), u);
          }
        }
      }
      float* dst = sQ + r * ldq + ck.width;
      if (i < half) {
        dst[2 * i] = u;
        dst[2 * i + 1] = w;
      } else {
        dst[rf.n_rot] = u;
      }
    }
  }
  __syncthreads();
  if (a.rot_k > 0) {
    const int nb = ck.width / a.rot_k;
    for (int e = tid; e < kRows * nb; e += nth) {
      fwht(sQ + (e / nb) * ldq + (e % nb) * a.rot_k, a.rot_k);
    }
  }
  float m = -INFINITY, l = 0.0f;  // row tid's running max and sum (threads < kRows)
  const int lane = tid % 32, warp = tid / 32;
  float acc[RW][NDV];  // rows warp * RW + i (warp * RW < kOwned), dims lane + 32 * j
#pragma unroll
  for (int i = 0; i < RW; ++i) {
#pragma unroll
    for (int j = 0; j < NDV; ++j) acc[i][j] = 0.0f;
  }

  for (int32_t j0 = 0; j0 <= last_pos; j0 += kKeys) {
    __syncthreads();  // previous tile fully used (and sQ rotated)
    fill_tile(sK, ldq, a.k, j0, last_pos, ck.c0, ck.width);
    for (int e = tid; e < kKeys * a.n_corr; e += nth) {
      const int j = e / a.n_corr, i = e % a.n_corr;
      const int32_t p = j0 + j;
      const int32_t n_rot = a.n_corr - 1;
      float x = 0.0f;
      if (p <= last_pos && p < a.k.split) x = i < n_rot ? a.k.ref.cs[int64_t{p} * n_rot + i] : 1.0f;
      sK[j * ldq + ck.width + i] = x;
    }
    fill_tile(sV, ldv, a.v, j0, last_pos, cv.c0, cv.width);
    // Unrotated hi rows (q4's f16 window) into the rotated domain of lo's rows.
    const bool hi_k = a.rot_k > 0 && j0 + kKeys > a.k.split,
               hi_v = a.rot_v > 0 && j0 + kKeys > a.v.split;
    if (hi_k || hi_v) {
      __syncthreads();
      if (hi_k) {
        const int nb = ck.width / a.rot_k;
        for (int e = tid; e < kKeys * nb; e += nth) {
          const int j = e / nb;
          if (j0 + j >= a.k.split) fwht(sK + j * ldq + (e % nb) * a.rot_k, a.rot_k);
        }
      }
      if (hi_v) {
        const int nb = cv.width / a.rot_v;
        for (int e = tid; e < kKeys * nb; e += nth) {
          const int j = e / nb;
          if (j0 + j >= a.v.split) fwht(sV + j * ldv + (e % nb) * a.rot_v, a.rot_v);
        }
      }
    }
    __syncthreads();
    if constexpr (FEW) {
      if (tid < kFewRows * kKeys) {
        const int r = tid / kKeys, j = tid % kKeys;
        const float* qr = sQ + r * ldq;
        const float* kr = sK + j * ldq;
        float sc = 0.0f;
        for (int d = 0; d < wq; ++d) sc = __fmaf_rn(qr[d], kr[d], sc);
        sP[r * (kKeys + 1) + j] =
            row_ok(r) && j0 + j <= row_pos(r) ? __fmul_rn(sc, a.scale) : -INFINITY;
      }
    } else {
      const int rg = tid / 8, kg = tid % 8;  // rows 2rg, 2rg + 1; keys kg + 8i
      float s[2][4];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int c = 0; c < 4; ++c) s[i][c] = 0.0f;
      }
      const float* q0 = sQ + (2 * rg) * ldq;
      const float* q1 = q0 + ldq;
      for (int d = 0; d < wq; ++d) {
        const float x0 = q0[d], x1 = q1[d];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const float kv = sK[(kg + 8 * c) * ldq + d];
          s[0][c] = __fmaf_rn(x0, kv, s[0][c]);
          s[1][c] = __fmaf_rn(x1, kv, s[1][c]);
        }
      }
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int r = 2 * rg + i;
        const bool ok = row_ok(r);
        const int32_t pr = row_pos(r);
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int j = kg + 8 * c;
          sP[r * (kKeys + 1) + j] = ok && j0 + j <= pr ? __fmul_rn(s[i][c], a.scale) : -INFINITY;
        }
      }
    }
    __syncthreads();
    if (tid < kRows) {
      float* pr = sP + tid * (kKeys + 1);
      if (row_ok(tid)) {
        float mt = -INFINITY;
        for (int j = 0; j < kKeys; ++j) mt = fmaxf(mt, pr[j]);
        const float m_new = fmaxf(m, mt);
        const float alpha = expf(__fsub_rn(m, m_new));  // 0 on the first tile (m = -inf)
        float sum = 0.0f;
        for (int j = 0; j < kKeys; ++j) {
          const float e = expf(__fsub_rn(pr[j], m_new));
          pr[j] = e;
          sum = __fadd_rn(sum, e);
        }
        l = __fmaf_rn(l, alpha, sum);
        m = m_new;
        sAlpha[tid] = alpha;
      } else {
        for (int j = 0; j < kKeys; ++j) pr[j] = 0.0f;
        sAlpha[tid] = 1.0f;
      }
    }
    __syncthreads();
    if (warp * RW < kOwned) {
#pragma unroll
      for (int i = 0; i < RW; ++i) {
        const float al = sAlpha[warp * RW + i];
#pragma unroll
        for (int j = 0; j < NDV; ++j) acc[i][j] = __fmul_rn(acc[i][j], al);
      }
      for (int jj = 0; jj < kKeys; ++jj) {
        float vv[NDV];
#pragma unroll
        for (int j = 0; j < NDV; ++j) {
          const int d = lane + 32 * j;
          vv[j] = d < cv.width ? sV[jj * ldv + d] : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < RW; ++i) {
          const float p = sP[(warp * RW + i) * (kKeys + 1) + jj];
#pragma unroll
          for (int j = 0; j < NDV; ++j) acc[i][j] = __fmaf_rn(p, vv[j], acc[i][j]);
        }
      }
    }
  }
  if (tid < kRows) sL[tid] = l;
  __syncthreads();  // every thread is past its last read of sK
  float* sO = sK;   // [kRows][ldv]
  if (a.rot_v > 0) {
    if (warp * RW < kOwned) {
#pragma unroll
      for (int i = 0; i < RW; ++i) {
#pragma unroll
        for (int j = 0; j < NDV; ++j) {
          const int d = lane + 32 * j;
          if (d < cv.width) sO[(warp * RW + i) * ldv + d] = acc[i][j];
        }
      }
    }
    __syncthreads();
    const int nb = cv.width / a.rot_v;
    for (int e = tid; e < kOwned * nb; e += nth) {
      fwht(sO + (e / nb) * ldv + (e % nb) * a.rot_v, a.rot_v);
    }
    __syncthreads();
  }
  if (warp * RW >= kOwned) return;
#pragma unroll
  for (int i = 0; i < RW; ++i) {
    const int r = warp * RW + i;
    if (!row_ok(r)) continue;
    float* orow = a.out + static_cast<int64_t>(t0 + r / a.nq) * a.out_stride +
                  static_cast<int64_t>(h_first + r % a.nq) * a.hd_v;
#pragma unroll
    for (int j = 0; j < NDV; ++j) {
      const int d = lane + 32 * j;
      if (d < a.hd_v) {
        const float x = a.rot_v > 0 ? sO[r * ldv + cv.skip + d] : acc[i][j];
        orow[d] = __fdiv_rn(x, sL[r]);
      }
    }
  }
}

template <int NDV>
cudaError_t launch(cudaStream_t s, const AttnArgs& a, dim3 grid, size_t smem) {
  // Live rows are r < nq * n_tok when a block holds every head of its kv head (nq == group).
  if (a.nq == a.group && a.nq * a.n_tok <= kFewRows) {
    flash_kernel<NDV, true><<<grid, kFewThreads, smem, s>>>(a);
  } else {
    flash_kernel<NDV, false><<<grid, kThreads, smem, s>>>(a);
  }
  return cudaGetLastError();
}

template <bool FEW>
cudaError_t setup_variant() {
  const int bytes = static_cast<int>(kMaxSmem);
  cudaError_t e = cudaFuncSetAttribute(flash_kernel<1, FEW>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess) {
    e = cudaFuncSetAttribute(flash_kernel<2, FEW>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             bytes);
  }
  if (e == cudaSuccess) {
    e = cudaFuncSetAttribute(flash_kernel<4, FEW>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             bytes);
  }
  if (e == cudaSuccess) {
    e = cudaFuncSetAttribute(flash_kernel<8, FEW>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             bytes);
  }
  return e;
}

}  // namespace

cudaError_t kv_attention_setup() {
  cudaError_t e = setup_variant<false>();
  if (e == cudaSuccess) e = setup_variant<true>();
  return e == cudaSuccess ? kv_attention_mma_setup() : e;
}

cudaError_t kv_attention(cudaStream_t s, const AttentionShape& sh, const float* q, int64_t q_stride,
                         int32_t n_tok, int32_t pos0, const KvDevSrc& k, const KvDevSrc& v,
                         float* out, int64_t out_stride, const int32_t* pos_dev) {
  if (n_tok <= 0) return cudaSuccess;
  if (sh.n_head <= 0 || sh.n_head_kv <= 0 || sh.n_head % sh.n_head_kv != 0 || sh.head_dim_k <= 0 ||
      sh.head_dim_v <= 0 || sh.head_dim_k > kMaxHd || sh.head_dim_v > kMaxHd || pos0 < 0) {
    return cudaErrorInvalidValue;
  }
  cudaError_t dec_err = cudaSuccess;
  // F16 / F32 caches of the common head sizes: the tensor-core kernel, for every call.
  if (kv_attention_mma(s, sh, q, q_stride, n_tok, pos0, k, v, out, out_stride, pos_dev, &dec_err)) {
    return dec_err;
  }
  if (kv_attention_decode(s, sh, q, q_stride, n_tok, pos0, k, v, out, pos_dev, &dec_err)) {
    return dec_err;
  }
  AttnArgs a;
  a.n_head_kv = sh.n_head_kv;
  a.group = sh.n_head / sh.n_head_kv;
  a.hd_k = sh.head_dim_k;
  a.hd_v = sh.head_dim_v;
  a.scale = sh.scale;
  a.q = q;
  a.q_stride = q_stride;
  a.n_tok = n_tok;
  a.pos0 = pos0;
  a.pos_dev = pos_dev;
  a.nq = a.group < kRows ? a.group : kRows;
  a.qt = kRows / a.nq;
  // Rotated K / V (Q8, Q8A, Q4 rows) are read in the rotated domain over the whole blocks
  // covering a head slice (one block structure per source).
  a.rot_k = is_rotated(k.lo.enc) ? k.lo.block : 0;
  a.rot_v = is_rotated(v.lo.enc) ? v.lo.block : 0;
  if ((k.split < INT32_MAX && is_rotated(k.hi.enc)) ||
      (v.split < INT32_MAX && is_rotated(v.hi.enc))) {
    return cudaErrorInvalidValue;
  }
  a.n_corr = 0;
  if (k.ref.c != nullptr) {
    // The reference is per head: whole heads, n_rot within one.
    if (k.ref.n_rot < 0 || k.ref.n_rot % 2 != 0 ||
        (k.ref.n_rot > 0 &&
         (k.ref.cs == nullptr || k.ref.head_dim != sh.head_dim_k || k.ref.n_rot > sh.head_dim_k))) {
      return cudaErrorInvalidValue;
    }
    a.n_corr = k.ref.n_rot + 1;
  }
  a.wk = a.wv = 0;
  for (int32_t g = 0; g < sh.n_head_kv; ++g) {
    const int32_t wk = cover_of(g, sh.head_dim_k, a.rot_k).width;
    const int32_t wv = cover_of(g, sh.head_dim_v, a.rot_v).width;
    a.wk = wk + a.n_corr > a.wk ? wk + a.n_corr : a.wk;
    a.wv = wv > a.wv ? wv : a.wv;
  }
  if (a.wv > 32 * 8) return cudaErrorInvalidValue;
  a.k = k;
  a.v = v;
  a.out = out;
  a.out_stride = out_stride;
  const size_t smem = smem_floats(a.wk, a.wv) * sizeof(float);
  if (smem > kMaxSmem) return cudaErrorInvalidValue;
  const int32_t n_chunks = (a.group + a.nq - 1) / a.nq;
  const dim3 grid(static_cast<unsigned>((n_tok + a.qt - 1) / a.qt),
                  static_cast<unsigned>(sh.n_head_kv), static_cast<unsigned>(n_chunks));
  if (a.wv <= 32) return launch<1>(s, a, grid, smem);
  if (a.wv <= 64) return launch<2>(s, a, grid, smem);
  if (a.wv <= 128) return launch<4>(s, a, grid, smem);
  return launch<8>(s, a, grid, smem);
}

}  // namespace geist::cuda
