// KV rows (F32 / F16, KvCache's byte layout) and causal grouped-query attention over them.
//
// Attention: one block per (query head, token). Keys are taken in tiles of kTile positions in
// position order; a thread scores one position of the tile (dot product over head_dim_k in
// index order with FMAs, then * scale), the tile's max and sum of exponentials come from fixed
// shared-memory trees, and the running output is rescaled by exp(m_old - m_new) (online
// softmax with max subtraction, all f32). Thread d then accumulates dims d, d + kThreads, ...
// of the output over the tile's positions in order. Nothing depends on n_tok or timing, and
// no atomics: a row's bits depend only on its inputs and sizes.
#include <cuda_fp16.h>

#include "backends/cuda/cuda_kernels.h"

namespace geist::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kTile = kThreads;       // key positions per tile: one per thread
constexpr int kMaxDimsPerThread = 4;  // head_dim_v <= 512

template <bool F16>
__device__ __forceinline__ float kv_load(const void* base, int64_t idx) {
  if constexpr (F16) {
    return __half2float(static_cast<const __half*>(base)[idx]);
  } else {
    return static_cast<const float*>(base)[idx];
  }
}

template <bool F16>
__global__ void store_rows_kernel(const float* __restrict__ src, int64_t src_stride, int32_t n_embd,
                                  void* __restrict__ dst) {
  const int64_t r = blockIdx.x;
  const float* s = src + r * src_stride;
  for (int32_t i = threadIdx.x; i < n_embd; i += blockDim.x) {
    if constexpr (F16) {
      static_cast<__half*>(dst)[r * n_embd + i] = __float2half_rn(s[i]);
    } else {
      static_cast<float*>(dst)[r * n_embd + i] = s[i];
    }
  }
}

template <bool F16>
__global__ void __launch_bounds__(kThreads)
    attention_kernel(int32_t n_head, int32_t n_head_kv, int32_t hd_k, int32_t hd_v, float scale,
                     const float* __restrict__ q, int64_t q_stride, int32_t pos0,
                     const void* __restrict__ k, int32_t n_embd_k, const void* __restrict__ v,
                     int32_t n_embd_v, float* __restrict__ out, int64_t out_stride) {
  extern __shared__ float smem[];  // q head [hd_k], then probabilities of the tile [kTile]
  float* sq = smem;
  float* sp = smem + hd_k;
  __shared__ float red[kThreads];  // tree reductions
  const int tid = threadIdx.x;
  const int32_t h = blockIdx.x;
  const int32_t t = blockIdx.y;
  const int32_t g = h / (n_head / n_head_kv);
  const float* qh = q + static_cast<int64_t>(t) * q_stride + static_cast<int64_t>(h) * hd_k;
  for (int32_t d = tid; d < hd_k; d += kThreads) sq[d] = qh[d];
  const int32_t n_pos = pos0 + t + 1;  // causal: keys [0, pos0 + t]
  float m = -INFINITY;                 // running max of the scores
  float l = 0.0f;                      // running sum of exp(score - m)
  float acc[kMaxDimsPerThread];
#pragma unroll
  for (int j = 0; j < kMaxDimsPerThread; ++j) acc[j] = 0.0f;
  __syncthreads();

  for (int32_t p0 = 0; p0 < n_pos; p0 += kTile) {
    const int32_t p = p0 + tid;
    float sc = -INFINITY;
    if (p < n_pos) {
      const int64_t base = static_cast<int64_t>(p) * n_embd_k + static_cast<int64_t>(g) * hd_k;
      float s = 0.0f;
      for (int32_t d = 0; d < hd_k; ++d) s = __fmaf_rn(sq[d], kv_load<F16>(k, base + d), s);
      sc = __fmul_rn(s, scale);
    }
    red[tid] = sc;
    __syncthreads();
    for (int off = kThreads / 2; off > 0; off >>= 1) {
      if (tid < off) red[tid] = fmaxf(red[tid], red[tid + off]);
      __syncthreads();
    }
    const float m_new = fmaxf(m, red[0]);
    __syncthreads();  // everyone has read red[0]
    const float e = p < n_pos ? expf(__fsub_rn(sc, m_new)) : 0.0f;
    sp[tid] = e;
    red[tid] = e;
    __syncthreads();
    for (int off = kThreads / 2; off > 0; off >>= 1) {
      if (tid < off) red[tid] = __fadd_rn(red[tid], red[tid + off]);
      __syncthreads();
    }
    const float alpha = expf(__fsub_rn(m, m_new));  // 0 on the first tile (m = -inf)
    l = __fmaf_rn(l, alpha, red[0]);
    m = m_new;
    const int32_t n_in_tile = n_pos - p0 < kTile ? n_pos - p0 : kTile;
#pragma unroll
    for (int j = 0; j < kMaxDimsPerThread; ++j) {
      const int32_t d = tid + j * kThreads;
      if (d < hd_v) {
        float a = __fmul_rn(acc[j], alpha);
        const int64_t col = static_cast<int64_t>(g) * hd_v + d;
        for (int32_t jj = 0; jj < n_in_tile; ++jj) {
          a = __fmaf_rn(sp[jj], kv_load<F16>(v, static_cast<int64_t>(p0 + jj) * n_embd_v + col), a);
        }
        acc[j] = a;
      }
    }
    __syncthreads();  // sp and red are rewritten by the next tile
  }
  float* oh = out + static_cast<int64_t>(t) * out_stride + static_cast<int64_t>(h) * hd_v;
#pragma unroll
  for (int j = 0; j < kMaxDimsPerThread; ++j) {
    const int32_t d = tid + j * kThreads;
    if (d < hd_v) oh[d] = __fdiv_rn(acc[j], l);
  }
}

}  // namespace

cudaError_t kv_store_rows(cudaStream_t s, bool f16, const float* src, int64_t src_stride, int32_t n,
                          int32_t n_embd, void* dst) {
  if (n <= 0 || n_embd <= 0) return cudaSuccess;
  if (f16) {
    store_rows_kernel<true><<<n, 256, 0, s>>>(src, src_stride, n_embd, dst);
  } else {
    store_rows_kernel<false><<<n, 256, 0, s>>>(src, src_stride, n_embd, dst);
  }
  return cudaGetLastError();
}

cudaError_t kv_attention(cudaStream_t s, bool f16, const AttentionShape& sh, const float* q,
                         int64_t q_stride, int32_t n_tok, int32_t pos0, const void* k,
                         int32_t n_embd_k, const void* v, int32_t n_embd_v, float* out,
                         int64_t out_stride) {
  if (n_tok <= 0) return cudaSuccess;
  if (sh.n_head <= 0 || sh.n_head_kv <= 0 || sh.n_head % sh.n_head_kv != 0 || sh.head_dim_k <= 0 ||
      sh.head_dim_v <= 0 || sh.head_dim_v > kThreads * kMaxDimsPerThread) {
    return cudaErrorInvalidValue;
  }
  const size_t smem = (static_cast<size_t>(sh.head_dim_k) + kTile) * sizeof(float);
  // Grid y holds at most 65535 tokens: longer batches go in several launches.
  for (int32_t t = 0; t < n_tok; t += 65535) {
    const int32_t nt = n_tok - t < 65535 ? n_tok - t : 65535;
    const dim3 grid(static_cast<unsigned>(sh.n_head), static_cast<unsigned>(nt));
    const float* qt = q + static_cast<int64_t>(t) * q_stride;
    float* ot = out + static_cast<int64_t>(t) * out_stride;
    if (f16) {
      attention_kernel<true><<<grid, kThreads, smem, s>>>(
          sh.n_head, sh.n_head_kv, sh.head_dim_k, sh.head_dim_v, sh.scale, qt, q_stride, pos0 + t,
          k, n_embd_k, v, n_embd_v, ot, out_stride);
    } else {
      attention_kernel<false><<<grid, kThreads, smem, s>>>(
          sh.n_head, sh.n_head_kv, sh.head_dim_k, sh.head_dim_v, sh.scale, qt, q_stride, pos0 + t,
          k, n_embd_k, v, n_embd_v, ot, out_stride);
    }
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaGetLastError();
}

}  // namespace geist::cuda
