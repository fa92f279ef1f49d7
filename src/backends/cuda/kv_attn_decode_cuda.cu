// Decode fast path of kv_attention (kv_attn_cuda.cu): one query token over f32 / f16 rows.
// (Heads of 64, 128 and 256 never get here: kv_attn_mma_cuda.cu takes all their calls.)
//
// The general kernel gives a decode step one block per kv head and walks the key tiles one
// after the other, each a chain of loads, barriers and serial sums: 15-26 us for a handful of
// keys on an H200. This kernel computes the same row with every independent part in
// parallel, and keeps only the chains the row's arithmetic prescribes (kv_attn_cuda.cu, top):
//   - scores s_j of all keys at once (one thread per key, the FMA chain over d in index
//     order, from 0, times scale; -inf past the query's position);
//   - per tile of kKeys positions: the tile's max (exact in any order), then, serially over
//     the tiles, m' = max(m, max_j s_j) and alpha = exp(m - m'); then per tile in parallel
//     p_j = exp(s_j - m') and their sum in index order;
//   - l = l * alpha + sum (one FMA per tile, in tile order), acc = acc * alpha then
//     fma(p_j, v_j, acc) over the tile's positions in order (values past the query's
//     position read as 0, as the general kernel's tile fill does); out = acc / l.
// So each output is bitwise what the general kernel writes for the same row
// (CudaKv.AttentionIsBitwiseIndependentOfCallSplit checks decode against prefill).
#include <cuda_fp16.h>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/kv_rows_cuda.cuh"
#include "backends/cuda/launch_cuda.cuh"

namespace geist::cuda {

namespace {

using kvrows::row_at;
using kvrows::Rows;
using kvrows::rows_of;

constexpr int kThreads = 256;
constexpr int kKeys = 32;                // positions per tile: the general kernel's kKeys
constexpr int kPer = 4;                  // keys a thread scores at once (independent chains)
constexpr int kSuper = kThreads * kPer;  // keys scored per round
constexpr int kTiles = kSuper / kKeys;   // tiles per round
constexpr int kWarps = kThreads / 32;

// 8 consecutive elements (16-byte aligned for F32 pairs / F16 octets) as floats.
template <bool F16>
__device__ __forceinline__ void load8(const uint8_t* p, float* v) {
  if constexpr (F16) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      v[2 * i] = f.x;
      v[2 * i + 1] = f.y;
    }
  } else {
    const float4 a = reinterpret_cast<const float4*>(p)[0];
    const float4 b = reinterpret_cast<const float4*>(p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
    v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  }
}

template <bool F16>
__device__ __forceinline__ float elem(const uint8_t* row, int d) {
  if constexpr (F16) {
    return __half2float(reinterpret_cast<const __half*>(row)[d]);
  } else {
    return reinterpret_cast<const float*>(row)[d];
  }
}

struct DecArgs {
  int32_t group, hd_k, hd_v;
  float scale;
  const float* q;  // [n_head][hd_k]
  int32_t pos0;
  const int32_t* pos_dev;
  Rows k, v;
  float* out;  // [n_head][hd_v]
};

// One block per query head.
template <bool F16>
__global__ void __launch_bounds__(kThreads) attn_decode_kernel(const DecArgs a) {
  __shared__ float sq[256];         // the query, [hd_k]
  __shared__ float ss[kSuper];      // scores, then probabilities, of a round's keys
  __shared__ float tmax[kTiles];    // per tile of the round: max score
  __shared__ float tm[kTiles];      // running max after the tile
  __shared__ float talpha[kTiles];  // exp(m before - m after)
  __shared__ float tsum[kTiles];    // sum of the tile's probabilities, in order
  __shared__ float s_m, s_l;
  pdl_begin();  // launched with launch_pdl
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int32_t h = static_cast<int32_t>(blockIdx.x);
  const int32_t g = h / a.group;
  constexpr int64_t es = F16 ? 2 : 4;  // element bytes
  const int64_t k_off = es * g * a.hd_k, v_off = es * g * a.hd_v;
  const int32_t last = a.pos0 + (a.pos_dev != nullptr ? *a.pos_dev : 0);
  for (int d = tid; d < a.hd_k; d += kThreads) sq[d] = a.q[int64_t{h} * a.hd_k + d];
  if (tid == 0) {
    s_m = -INFINITY;
    s_l = 0.0f;
  }
  float acc = 0.0f;  // output dim tid (tid < hd_v)
  for (int32_t base = 0; base <= last; base += kSuper) {
    const int32_t n_keys = last + 1 - base < kSuper ? last + 1 - base : kSuper;
    const int n_tiles = (n_keys + kKeys - 1) / kKeys;
    __syncthreads();  // sq written; the previous round's ss / t* fully used
    {
      const uint8_t* kr[kPer];
      bool live[kPer];
#pragma unroll
      for (int u = 0; u < kPer; ++u) {
        const int32_t j = base + tid + u * kThreads;
        live[u] = j <= last;
        kr[u] = row_at(a.k, live[u] ? j : 0) + k_off;
      }
      float sc[kPer] = {};
      const bool any = live[0];  // keys are dense from tid: no live key past a dead one
      if (any) {
        for (int d = 0; d < a.hd_k; d += 8) {
          float qv[8];
#pragma unroll
          for (int i = 0; i < 8; ++i) qv[i] = sq[d + i];
#pragma unroll
          for (int u = 0; u < kPer; ++u) {
            if (live[u]) {
              float kv[8];
              load8<F16>(kr[u] + es * d, kv);
#pragma unroll
              for (int i = 0; i < 8; ++i) sc[u] = __fmaf_rn(qv[i], kv[i], sc[u]);
            }
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kPer; ++u) {
        ss[tid + u * kThreads] = live[u] ? __fmul_rn(sc[u], a.scale) : -INFINITY;
      }
    }
    __syncthreads();
    for (int t = warp; t < n_tiles; t += kWarps) {
      float x = ss[t * kKeys + lane];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
      if (lane == 0) tmax[t] = x;
    }
    __syncthreads();
    if (tid == 0) {
      float m = s_m;
      for (int t = 0; t < n_tiles; ++t) {
        const float m_new = fmaxf(m, tmax[t]);
        talpha[t] = expf(__fsub_rn(m, m_new));  // 0 on the first tile (m = -inf)
        tm[t] = m_new;
        m = m_new;
      }
      s_m = m;
    }
    __syncthreads();
    for (int t = warp; t < n_tiles; t += kWarps) {
      float* pt = ss + t * kKeys;
      pt[lane] = expf(__fsub_rn(pt[lane], tm[t]));
      __syncwarp();
      if (lane == 0) {
        float sum = 0.0f;
        for (int j = 0; j < kKeys; ++j) sum = __fadd_rn(sum, pt[j]);
        tsum[t] = sum;
      }
    }
    __syncthreads();
    if (tid == 0) {
      float l = s_l;
      for (int t = 0; t < n_tiles; ++t) l = __fmaf_rn(l, talpha[t], tsum[t]);
      s_l = l;
    }
    if (tid < a.hd_v) {
      for (int t = 0; t < n_tiles; ++t) {
        acc = __fmul_rn(acc, talpha[t]);
        const int32_t j0 = base + t * kKeys;
#pragma unroll 8
        for (int jj = 0; jj < kKeys; ++jj) {
          const int32_t j = j0 + jj;
          const float vv = j <= last ? elem<F16>(row_at(a.v, j) + v_off, tid) : 0.0f;
          acc = __fmaf_rn(ss[t * kKeys + jj], vv, acc);
        }
      }
    }
  }
  __syncthreads();
  if (tid < a.hd_v) a.out[int64_t{h} * a.hd_v + tid] = __fdiv_rn(acc, s_l);
}

}  // namespace

bool kv_attention_decode(cudaStream_t s, const AttentionShape& sh, const float* q, int64_t q_stride,
                         int32_t n_tok, int32_t pos0, const KvDevSrc& k, const KvDevSrc& v,
                         float* out, const int32_t* pos_dev, cudaError_t* err) {
  (void)q_stride;  // one token: only row 0 is read
  if (n_tok != 1 || k.ref.c != nullptr || sh.head_dim_k > 256 || sh.head_dim_v > kThreads ||
      sh.head_dim_k % 8 != 0 || sh.n_head_kv <= 0 || sh.n_head % sh.n_head_kv != 0) {
    return false;
  }
  DecArgs a;
  bool kf16 = false, vf16 = false;
  if (!rows_of(k, sh.head_dim_k, sh.n_head_kv, &kf16, &a.k) ||
      !rows_of(v, sh.head_dim_v, sh.n_head_kv, &vf16, &a.v) || kf16 != vf16) {
    return false;
  }
  a.group = sh.n_head / sh.n_head_kv;
  a.hd_k = sh.head_dim_k;
  a.hd_v = sh.head_dim_v;
  a.scale = sh.scale;
  a.q = q;
  a.pos0 = pos0;
  a.pos_dev = pos_dev;
  a.out = out;
  *err = launch_pdl(kf16 ? attn_decode_kernel<true> : attn_decode_kernel<false>,
                    dim3(static_cast<unsigned>(sh.n_head)), dim3(kThreads), 0, s, a);
  return true;
}

}  // namespace geist::cuda
