// The rope kernels: rope() of one or two tensors (q and k of a layer), with the heads' rms_norm
// in front (Qwen3.5's q / k norms), and with the KV rows of the same tokens written by the same
// launch (rope_kv: a plain cache's write of the decode step). Arithmetic as ops_cuda.cu: the
// CPU's double angles, rounded cos / sin, explicit round-to-nearest f32 products.
// Launched with launch_pdl (launch_cuda.cuh): the angles are computed before pdl_begin() (they
// read only the step's position and the frequency factors), everything else after it.
#include <cuda_fp16.h>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/kv_codec_cuda.cuh"
#include "backends/cuda/launch_cuda.cuh"
#include "backends/cuda/norm_cuda.cuh"
#include "backends/cuda/rope_cuda.cuh"

namespace geist::cuda {

namespace {

using kvdev::kv_put;
using ropek::block_angles;
using ropek::pair_at;
using ropek::turn;

constexpr int kRopeThreads = 256;

// One block per token: the pairs' angles (double) once into shared memory, then one thread
// per (head, pair) of both tensors (a's heads, then b's) with its loads issued together. Per
// element the arithmetic of the CPU's rope(): the same double angle, rounded cos / sin, f32
// products.
__global__ void __launch_bounds__(kRopeThreads)
    rope_kernel(const RopeTensor a, const RopeTensor b, int32_t head_dim, int32_t pos0,
                const int32_t* __restrict__ pos_dev, int32_t n_rot, int32_t neox, float freq_base,
                float freq_scale, const float* __restrict__ freq_factors) {
  __shared__ float cs[2][128];  // [cos / sin][pair], n_rot <= 256
  // The angles read only the step's position and the frequency factors (see pdl_wait): their
  // double math runs while the matmul ahead finishes.
  const int32_t half = n_rot / 2;
  const int32_t t = static_cast<int32_t>(blockIdx.x);
  const int32_t pos = (pos_dev != nullptr ? pos0 + *pos_dev : pos0) + t;
  block_angles(cs, pos, n_rot, freq_base, freq_scale, freq_factors);
  pdl_begin();
  __syncthreads();
  float* xa = a.x + static_cast<int64_t>(t) * a.x_stride;
  float* xb = b.x + static_cast<int64_t>(t) * b.x_stride;  // unused when b.n_head == 0
  const int32_t n_a = a.n_head * half;
  const int32_t total = n_a + b.n_head * half;
  constexpr int U = 4;
  for (int32_t e0 = static_cast<int32_t>(threadIdx.x); e0 < total; e0 += U * kRopeThreads) {
    float x0[U], x1[U];
    float* pa[U];
    float* pb[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int32_t e = e0 + u * kRopeThreads;
      const bool in_a = e < n_a;
      const int32_t eh = in_a ? e : e - n_a;
      const int32_t h = eh / half, i = eh % half;
      float* xt = in_a ? xa : xb;
      int32_t i0, i1;
      pair_at(i, half, neox, &i0, &i1);
      pa[u] = xt + static_cast<int64_t>(h) * head_dim + i0;
      pb[u] = xt + static_cast<int64_t>(h) * head_dim + i1;
      x0[u] = e < total ? *pa[u] : 0.0f;
      x1[u] = e < total ? *pb[u] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int32_t e = e0 + u * kRopeThreads;
      if (e < total) {
        const int32_t i = (e < n_a ? e : e - n_a) % half;
        turn(x0[u], x1[u], cs[0][i], cs[1][i], pa[u], pb[u]);
      }
    }
  }
}

// rope_kernel with the heads' rms_norm in front (RopeTensor::src): one block of
// norm_threads(head_dim) threads per (token, head) of a then b. A head with a source is
// normalised with rms_norm_kernel's arithmetic and order (one pass: head_dim <= T * kNormPer),
// a head without one is read as it is; the row goes through shared memory, and its pairs turn
// with rope_kernel's arithmetic. So each element is bitwise rms_norm() followed by rope().
// KV (rope_kv): b's heads also write their final rows into the K rows, and n_tok * vchunks
// more blocks (after the heads' ones) copy kv.v into the V rows, head_dim values each.
constexpr int kMaxNormRopeDim = 1024;

template <bool KV>
__global__ void __launch_bounds__(1024)
    norm_rope_kernel(const RopeTensor a, const RopeTensor b, int32_t head_dim, int32_t pos0,
                     const int32_t* __restrict__ pos_dev, int32_t n_rot, int32_t neox,
                     float freq_base, float freq_scale, const float* __restrict__ freq_factors,
                     const KvRowsOut kv, int32_t n_tok) {
  __shared__ float row[kMaxNormRopeDim];  // the head, [head_dim]
  __shared__ float cs[2][128];            // [cos / sin][pair]
  const int T = static_cast<int>(blockDim.x);
  const int tid = static_cast<int>(threadIdx.x);
  const int32_t heads = a.n_head + b.n_head;
  if constexpr (KV) {
    const int32_t j = static_cast<int32_t>(blockIdx.x) - n_tok * heads;
    if (j >= 0) {  // a chunk of a token's values
      const int32_t vchunks = (kv.nv + head_dim - 1) / head_dim;
      const int32_t t = j / vchunks, c0 = (j % vchunks) * head_dim;
      pdl_begin();
      const int64_t r = t + (kv.row_dev != nullptr ? *kv.row_dev : 0);
      uint8_t* vrow = kv.v_dst + r * kv.v_row_bytes;
      const float* src = kv.v + static_cast<int64_t>(t) * kv.v_stride;
      for (int32_t c = c0 + tid; c < c0 + head_dim && c < kv.nv; c += T)
        kv_put(kv.f16, vrow, c, src[c]);
      return;
    }
  }
  const int32_t t = static_cast<int32_t>(blockIdx.x) / heads;
  const int32_t hh = static_cast<int32_t>(blockIdx.x) % heads;
  const bool in_a = hh < a.n_head;
  const RopeTensor& u = in_a ? a : b;
  const int32_t h = in_a ? hh : hh - a.n_head;
  float* xr = u.x + static_cast<int64_t>(t) * u.x_stride + static_cast<int64_t>(h) * head_dim;
  const int32_t half = n_rot / 2;
  const int32_t pos = (pos_dev != nullptr ? pos0 + *pos_dev : pos0) + t;
  block_angles(cs, pos, n_rot, freq_base, freq_scale, freq_factors);  // before the wait
  pdl_begin();
  if (u.src != nullptr) {
    const float* sr = u.src + (static_cast<int64_t>(t) * u.n_head + h) * u.src_stride;
    float v[kNormPer], wv[kNormPer];
    double s = 0;
#pragma unroll
    for (int k = 0; k < kNormPer; ++k) {
      const int i = tid + T * k;
      v[k] = i < head_dim ? sr[i] : 0.0f;
      wv[k] = u.norm_w != nullptr && i < head_dim ? u.norm_w[i] : 1.0f;
    }
#pragma unroll
    for (int k = 0; k < kNormPer; ++k) {
      if (tid + T * k < head_dim) {
        const double d = v[k];
        s = __dadd_rn(s, __dmul_rn(d, d));
      }
    }
    const float scale = block_norm_scale(s, head_dim, u.norm_eps);
#pragma unroll
    for (int k = 0; k < kNormPer; ++k) {
      const int i = tid + T * k;
      if (i < head_dim) {
        const float o = __fmul_rn(v[k], scale);
        row[i] = u.norm_w != nullptr ? __fmul_rn(o, wv[k]) : o;
      }
    }
  } else {
    for (int i = tid; i < head_dim; i += T) row[i] = xr[i];
  }
  __syncthreads();
  for (int32_t i = tid; i < half; i += T) {
    int32_t i0, i1;
    pair_at(i, half, neox, &i0, &i1);
    const float x0 = row[i0], x1 = row[i1];
    turn(x0, x1, cs[0][i], cs[1][i], &row[i0], &row[i1]);
  }
  __syncthreads();
  for (int i = tid; i < head_dim; i += T) xr[i] = row[i];
  if constexpr (KV) {
    if (!in_a) {
      const int64_t r = t + (kv.row_dev != nullptr ? *kv.row_dev : 0);
      uint8_t* krow = kv.k_dst + r * kv.k_row_bytes;
      const int64_t c0 = static_cast<int64_t>(h) * head_dim;
      for (int i = tid; i < head_dim; i += T) kv_put(kv.f16, krow, c0 + i, row[i]);
    }
  }
}

// rope_kernel with the KV rows (rope_kv, no norms): blockIdx.y is the token, and the threads
// of its blockIdx.x blocks take one item each of: a's pairs, b's pairs (also written to the K
// row), b's values past n_rot (K row only: rope leaves them as they are), then the values
// (V row). Each block computes the angles it may need, before the wait as rope_kernel does.
// More blocks than rope_kernel's one per token: a decode step's rope is latency, not work.
__global__ void __launch_bounds__(kRopeThreads)
    rope_kv_kernel(const RopeTensor a, const RopeTensor b, int32_t head_dim, int32_t pos0,
                   const int32_t* __restrict__ pos_dev, int32_t n_rot, int32_t neox,
                   float freq_base, float freq_scale, const float* __restrict__ freq_factors,
                   const KvRowsOut kv) {
  __shared__ float cs[2][128];  // [cos / sin][pair], n_rot <= 256
  const int32_t half = n_rot / 2;
  const int32_t t = static_cast<int32_t>(blockIdx.y);
  const int32_t pos = (pos_dev != nullptr ? pos0 + *pos_dev : pos0) + t;
  block_angles(cs, pos, n_rot, freq_base, freq_scale, freq_factors);
  pdl_begin();
  __syncthreads();
  const int64_t r = t + (kv.row_dev != nullptr ? *kv.row_dev : 0);
  uint8_t* krow = kv.k_dst + r * kv.k_row_bytes;
  uint8_t* vrow = kv.v_dst + r * kv.v_row_bytes;
  float* xa = a.x + static_cast<int64_t>(t) * a.x_stride;  // unused when a.n_head == 0
  float* xb = b.x + static_cast<int64_t>(t) * b.x_stride;
  const float* xv = kv.v + static_cast<int64_t>(t) * kv.v_stride;
  const int32_t tail = head_dim - n_rot;
  const int32_t n_a = a.n_head * half, n_ab = n_a + b.n_head * half;
  const int32_t n_k = n_ab + b.n_head * tail, total = n_k + kv.nv;
  for (int32_t e = static_cast<int32_t>(blockIdx.x * kRopeThreads + threadIdx.x); e < total;
       e += static_cast<int32_t>(gridDim.x) * kRopeThreads) {
    if (e < n_ab) {
      const bool in_a = e < n_a;
      const int32_t eh = in_a ? e : e - n_a;
      const int32_t h = eh / half, i = eh % half;
      int32_t p0, p1;
      pair_at(i, half, neox, &p0, &p1);
      const int64_t i0 = static_cast<int64_t>(h) * head_dim + p0;
      const int64_t i1 = static_cast<int64_t>(h) * head_dim + p1;
      float* xt = in_a ? xa : xb;
      const float x0 = xt[i0], x1 = xt[i1];
      float y0, y1;
      turn(x0, x1, cs[0][i], cs[1][i], &y0, &y1);
      xt[i0] = y0;
      xt[i1] = y1;
      if (!in_a) {
        kv_put(kv.f16, krow, i0, y0);
        kv_put(kv.f16, krow, i1, y1);
      }
    } else if (e < n_k) {
      const int32_t j = e - n_ab;
      const int64_t c = static_cast<int64_t>(j / tail) * head_dim + n_rot + j % tail;
      kv_put(kv.f16, krow, c, xb[c]);
    } else {
      const int32_t c = e - n_k;
      kv_put(kv.f16, vrow, c, xv[c]);
    }
  }
}

}  // namespace

bool rope_can_norm(int32_t head_dim) {
  return head_dim > 0 && head_dim <= kMaxNormRopeDim && head_dim % 2 == 0;
}

cudaError_t rope(cudaStream_t s, const RopeTensor& a, const RopeTensor& b, int32_t n_tok,
                 int32_t head_dim, int32_t pos0, const int32_t* pos_dev, const RopeParams& p) {
  if (n_tok <= 0 || p.n_rot <= 0 || p.n_rot % 2 != 0 || p.n_rot > head_dim || p.n_rot > 256) {
    return n_tok <= 0 ? cudaSuccess : cudaErrorInvalidValue;
  }
  RopeTensor ta = a, tb = b;
  if (ta.n_head <= 0) {  // b alone (or nothing)
    ta = tb;
    tb = RopeTensor{};
  }
  if (ta.n_head <= 0) return cudaSuccess;
  if (tb.n_head < 0) tb.n_head = 0;
  const int neox = p.style == RopeStyle::NEOX ? 1 : 0;
  if (ta.src != nullptr || tb.src != nullptr) {
    if (!rope_can_norm(head_dim)) return cudaErrorInvalidValue;
    const int64_t blocks = int64_t{n_tok} * (ta.n_head + tb.n_head);
    if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
    return launch_pdl(norm_rope_kernel<false>, dim3(static_cast<unsigned>(blocks)),
                      dim3(norm_threads(head_dim)), 0, s, ta, tb, head_dim, pos0, pos_dev, p.n_rot,
                      neox, p.freq_base, p.freq_scale, p.freq_factors, KvRowsOut{}, n_tok);
  }
  return launch_pdl(rope_kernel, dim3(static_cast<unsigned>(n_tok)), dim3(kRopeThreads), 0, s, ta,
                    tb, head_dim, pos0, pos_dev, p.n_rot, neox, p.freq_base, p.freq_scale,
                    p.freq_factors);
}

cudaError_t rope_kv(cudaStream_t s, const RopeTensor& a, const RopeTensor& b, int32_t n_tok,
                    int32_t head_dim, int32_t pos0, const int32_t* pos_dev, const RopeParams& p,
                    const KvRowsOut& kv) {
  if (n_tok <= 0) return cudaSuccess;
  if (p.n_rot <= 0 || p.n_rot % 2 != 0 || p.n_rot > head_dim || p.n_rot > 256 || b.n_head <= 0 ||
      a.n_head < 0 || kv.nv < 0 || kv.k_dst == nullptr || (kv.nv > 0 && kv.v_dst == nullptr)) {
    return cudaErrorInvalidValue;
  }
  const int neox = p.style == RopeStyle::NEOX ? 1 : 0;
  if (a.src != nullptr || b.src != nullptr) {
    if (!rope_can_norm(head_dim)) return cudaErrorInvalidValue;
    const int64_t vchunks = (int64_t{kv.nv} + head_dim - 1) / head_dim;
    const int64_t blocks = int64_t{n_tok} * (a.n_head + b.n_head + vchunks);
    if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
    return launch_pdl(norm_rope_kernel<true>, dim3(static_cast<unsigned>(blocks)),
                      dim3(norm_threads(head_dim)), 0, s, a, b, head_dim, pos0, pos_dev, p.n_rot,
                      neox, p.freq_base, p.freq_scale, p.freq_factors, kv, n_tok);
  }
  const int64_t items = int64_t{a.n_head + b.n_head} * (p.n_rot / 2) +
                        int64_t{b.n_head} * (head_dim - p.n_rot) + kv.nv;  // per token
  if (items > 0x7fffffff || n_tok > 65535) return cudaErrorInvalidValue;
  const int64_t bx = (items + kRopeThreads - 1) / kRopeThreads;
  return launch_pdl(rope_kv_kernel, dim3(static_cast<unsigned>(bx), static_cast<unsigned>(n_tok)),
                    dim3(kRopeThreads), 0, s, a, b, head_dim, pos0, pos_dev, p.n_rot, neox,
                    p.freq_base, p.freq_scale, p.freq_factors, kv);
}

}  // namespace geist::cuda
