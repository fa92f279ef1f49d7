// Element-wise and per-row kernels: rms_norm, rope, add, swiglu, sigmoid_mul. Arithmetic uses
// the explicit round-to-nearest intrinsics in the CPU kernels' order (no FMA contraction), so
// the only differences from src/kernels/ops.cpp are the device's expf / pow / cos / sin and,
// for rms_norm, the order in which the double sum of squares is added up.
// Every kernel here is launched with launch_pdl (launch_cuda.cuh) and starts with pdl_begin(),
// except that the ropes compute their angles first (they read no earlier kernel's output).
#include <cstdlib>
#include <cstring>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/launch_cuda.cuh"

namespace geist::cuda {

namespace {

constexpr int kEwThreads = 256;
constexpr int kNormPer = 8;  // row elements a thread holds in registers per pass
constexpr int kRopeThreads = 256;

// Threads per row of length n: a function of n alone (it fixes the order of the sum).
__host__ __device__ __forceinline__ int norm_threads(int64_t n) {
  int t = 32;
  while (t < 1024 && static_cast<int64_t>(t) * kNormPer < n) t *= 2;
  return t;
}

// The rms_norm scale 1 / sqrt(mean + eps) of a row from each thread's partial sum of squares
// s: a fixed tree, xor shuffles within each warp, then over the warps' sums in warp 0. Every
// thread of the block calls it (it synchronises) and gets the same scale.
__device__ __forceinline__ float block_norm_scale(double s, int64_t n, float eps) {
  __shared__ double wsum[32];
  __shared__ float s_scale;
  const int tid = static_cast<int>(threadIdx.x);
  for (int off = 16; off > 0; off >>= 1) s = __dadd_rn(s, __shfl_xor_sync(0xffffffffu, s, off));
  if ((tid & 31) == 0) wsum[tid >> 5] = s;
  __syncthreads();
  if (tid < 32) {
    const int nw = static_cast<int>(blockDim.x) / 32;
    double t = tid < nw ? wsum[tid] : 0.0;
    for (int off = 16; off > 0; off >>= 1) t = __dadd_rn(t, __shfl_xor_sync(0xffffffffu, t, off));
    if (tid == 0) {
      const float mean = static_cast<float>(t / static_cast<double>(n));
      s_scale = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, eps)));
    }
  }
  __syncthreads();
  return s_scale;
}

// The cos and sin of rope pair i at position pos: the CPU rope()'s double angle, rounded.
__device__ __forceinline__ void rope_angle(int32_t pos, int32_t i, int32_t n_rot, float freq_base,
                                           float freq_scale, const float* freq_factors, float* c,
                                           float* sn) {
  double theta = static_cast<double>(pos) * static_cast<double>(freq_scale) *
                 pow(static_cast<double>(freq_base), -2.0 * i / n_rot);
  if (freq_factors != nullptr) theta /= static_cast<double>(freq_factors[i]);
  *c = static_cast<float>(cos(theta));
  *sn = static_cast<float>(sin(theta));
}

// RES: x[r] += res[r] first (the residual add fused in front; rows contiguous). Each thread
// adds, squares and later rewrites only its own elements, so x, y and res may alias row for
// row, and the result is bitwise that of add_kernel followed by the plain kernel.
// Thread t of the norm_threads(n) holds elements t + T k; its loads of a pass are all issued
// before the first use, so a row costs about one memory latency, not one per element.
template <bool RES>
__global__ void __launch_bounds__(1024)
    rms_norm_kernel(float* x, int64_t x_stride, const float* res, const float* __restrict__ w,
                    float* y, int64_t y_stride, int64_t n, float eps) {
  pdl_begin();
  const int T = static_cast<int>(blockDim.x);
  const int tid = static_cast<int>(threadIdx.x);
  float* xr = x + static_cast<int64_t>(blockIdx.x) * x_stride;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * y_stride;
  const float* rr = RES ? res + static_cast<int64_t>(blockIdx.x) * n : nullptr;
  const int64_t pass = static_cast<int64_t>(T) * kNormPer;
  // x * x of two floats is exact in double, so only the additions round (in this order).
  double s = 0;
  float v[kNormPer], wv[kNormPer];
  for (int64_t base = 0; base < n; base += pass) {
#pragma unroll
    for (int k = 0; k < kNormPer; ++k) {
      const int64_t i = base + tid + static_cast<int64_t>(T) * k;
      v[k] = i < n ? xr[i] : 0.0f;
      wv[k] = w != nullptr && i < n ? w[i] : 1.0f;  // the last pass's, kept for one pass
      if constexpr (RES) {
        if (i < n) v[k] = __fadd_rn(v[k], rr[i]);
      }
    }
#pragma unroll
    for (int k = 0; k < kNormPer; ++k) {
      const int64_t i = base + tid + static_cast<int64_t>(T) * k;
      if (i < n) {
        if constexpr (RES) xr[i] = v[k];
        const double d = v[k];
        s = __dadd_rn(s, __dmul_rn(d, d));
      }
    }
  }
  const float scale = block_norm_scale(s, n, eps);
  // Each thread rewrites only the elements it read: x and y may alias.
  for (int64_t base = 0; base < n; base += pass) {
    if (n > pass) {  // several passes: this thread's elements again (it wrote them itself)
#pragma unroll
      for (int k = 0; k < kNormPer; ++k) {
        const int64_t i = base + tid + static_cast<int64_t>(T) * k;
        v[k] = i < n ? xr[i] : 0.0f;
        wv[k] = w != nullptr && i < n ? w[i] : 1.0f;
      }
    }
#pragma unroll
    for (int k = 0; k < kNormPer; ++k) {
      const int64_t i = base + tid + static_cast<int64_t>(T) * k;
      if (i < n) {
        const float o = __fmul_rn(v[k], scale);
        yr[i] = w != nullptr ? __fmul_rn(o, wv[k]) : o;
      }
    }
  }
}

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
  for (int32_t i = static_cast<int32_t>(threadIdx.x); i < half; i += kRopeThreads) {
    rope_angle(pos, i, n_rot, freq_base, freq_scale, freq_factors, &cs[0][i], &cs[1][i]);
  }
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
      pa[u] = xt + static_cast<int64_t>(h) * head_dim + (neox ? i : 2 * i);
      pb[u] = xt + static_cast<int64_t>(h) * head_dim + (neox ? i + half : 2 * i + 1);
      x0[u] = e < total ? *pa[u] : 0.0f;
      x1[u] = e < total ? *pb[u] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int32_t e = e0 + u * kRopeThreads;
      if (e < total) {
        const int32_t i = (e < n_a ? e : e - n_a) % half;
        const float c = cs[0][i], sn = cs[1][i];
        *pa[u] = __fsub_rn(__fmul_rn(x0[u], c), __fmul_rn(x1[u], sn));
        *pb[u] = __fadd_rn(__fmul_rn(x0[u], sn), __fmul_rn(x1[u], c));
      }
    }
  }
}

// rope_kernel with the heads' rms_norm in front (RopeTensor::src): one block of
// norm_threads(head_dim) threads per (token, head) of a then b. A head with a source is
// normalised with rms_norm_kernel's arithmetic and order (one pass: head_dim <= T * kNormPer),
// a head without one is read as it is; the row goes through shared memory, and its pairs turn
// with rope_kernel's arithmetic. So each element is bitwise rms_norm() followed by rope().
constexpr int kMaxNormRopeDim = 1024;

__global__ void __launch_bounds__(1024)
    norm_rope_kernel(const RopeTensor a, const RopeTensor b, int32_t head_dim, int32_t pos0,
                     const int32_t* __restrict__ pos_dev, int32_t n_rot, int32_t neox,
                     float freq_base, float freq_scale, const float* __restrict__ freq_factors) {
  __shared__ float row[kMaxNormRopeDim];  // the head, [head_dim]
  __shared__ float cs[2][128];            // [cos / sin][pair]
  const int T = static_cast<int>(blockDim.x);
  const int tid = static_cast<int>(threadIdx.x);
  const int32_t heads = a.n_head + b.n_head;
  const int32_t t = static_cast<int32_t>(blockIdx.x) / heads;
  const int32_t hh = static_cast<int32_t>(blockIdx.x) % heads;
  const bool in_a = hh < a.n_head;
  const RopeTensor& u = in_a ? a : b;
  const int32_t h = in_a ? hh : hh - a.n_head;
  float* xr = u.x + static_cast<int64_t>(t) * u.x_stride + static_cast<int64_t>(h) * head_dim;
  const int32_t half = n_rot / 2;
  const int32_t pos = (pos_dev != nullptr ? pos0 + *pos_dev : pos0) + t;
  for (int32_t i = tid; i < half; i += T) {  // before the wait, as in rope_kernel
    rope_angle(pos, i, n_rot, freq_base, freq_scale, freq_factors, &cs[0][i], &cs[1][i]);
  }
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
    const int32_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
    const float x0 = row[i0], x1 = row[i1];
    const float c = cs[0][i], sn = cs[1][i];
    row[i0] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, sn));
    row[i1] = __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, c));
  }
  __syncthreads();
  for (int i = tid; i < head_dim; i += T) xr[i] = row[i];
}

__global__ void add_kernel(float* y, const float* x, int64_t n) {
  pdl_begin();
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = __fadd_rn(y[i], x[i]);
  }
}

__device__ __forceinline__ float sigmoid_dev(float v) {
  return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-v)));
}

__global__ void swiglu_kernel(const float* gate, const float* up, float* out, int64_t n) {
  pdl_begin();
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    const float silu = __fdiv_rn(g, __fadd_rn(1.0f, expf(-g)));
    out[i] = __fmul_rn(silu, up[i]);
  }
}

__global__ void sigmoid_mul_kernel(float* x, int64_t x_stride, const float* gate,
                                   int64_t gate_stride, int32_t n_rows, int64_t n) {
  pdl_begin();
  const int64_t total = static_cast<int64_t>(n_rows) * n;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / n;
    const int64_t d = i % n;
    float* p = x + r * x_stride + d;
    *p = __fmul_rn(*p, sigmoid_dev(gate[r * gate_stride + d]));
  }
}

// Enough blocks to fill the device for large n; grid-stride loops cover the rest.
unsigned ew_blocks(int64_t n) {
  const int64_t b = (n + kEwThreads - 1) / kEwThreads;
  return static_cast<unsigned>(b < 65536 ? (b > 0 ? b : 1) : 65536);
}

}  // namespace

bool pdl_enabled() {
  // Configuration read once, never written afterwards.
  static const bool on = [] {
    const char* v = std::getenv("GEIST_CUDA_PDL");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

cudaError_t rms_norm(cudaStream_t s, const float* x, int64_t x_stride, const float* w, float* y,
                     int64_t y_stride, int32_t n_rows, int64_t n, float eps) {
  if (n_rows <= 0 || n <= 0) return cudaSuccess;
  // x is only read here; the kernel's pointer is non-const for the fused variant.
  return launch_pdl(rms_norm_kernel<false>, dim3(n_rows), dim3(norm_threads(n)), 0, s,
                    const_cast<float*>(x), x_stride, static_cast<const float*>(nullptr), w, y,
                    y_stride, n, eps);
}

cudaError_t add_rms_norm(cudaStream_t s, float* x, const float* res, const float* w, float* y,
                         int64_t y_stride, int32_t n_rows, int64_t n, float eps) {
  if (n_rows <= 0 || n <= 0) return cudaSuccess;
  return launch_pdl(rms_norm_kernel<true>, dim3(n_rows), dim3(norm_threads(n)), 0, s, x, n, res, w,
                    y, y_stride, n, eps);
}

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
    return launch_pdl(norm_rope_kernel, dim3(static_cast<unsigned>(blocks)),
                      dim3(norm_threads(head_dim)), 0, s, ta, tb, head_dim, pos0, pos_dev, p.n_rot,
                      neox, p.freq_base, p.freq_scale, p.freq_factors);
  }
  return launch_pdl(rope_kernel, dim3(static_cast<unsigned>(n_tok)), dim3(kRopeThreads), 0, s, ta,
                    tb, head_dim, pos0, pos_dev, p.n_rot, neox, p.freq_base, p.freq_scale,
                    p.freq_factors);
}

cudaError_t add(cudaStream_t s, float* y, const float* x, int64_t n) {
  if (n <= 0) return cudaSuccess;
  return launch_pdl(add_kernel, dim3(ew_blocks(n)), dim3(kEwThreads), 0, s, y, x, n);
}

cudaError_t swiglu(cudaStream_t s, const float* gate, const float* up, float* out, int64_t n) {
  if (n <= 0) return cudaSuccess;
  return launch_pdl(swiglu_kernel, dim3(ew_blocks(n)), dim3(kEwThreads), 0, s, gate, up, out, n);
}

cudaError_t sigmoid_mul(cudaStream_t s, float* x, int64_t x_stride, const float* gate,
                        int64_t gate_stride, int32_t n_rows, int64_t n) {
  if (n_rows <= 0 || n <= 0) return cudaSuccess;
  return launch_pdl(sigmoid_mul_kernel, dim3(ew_blocks(n_rows * n)), dim3(kEwThreads), 0, s, x,
                    x_stride, gate, gate_stride, n_rows, n);
}

}  // namespace geist::cuda
