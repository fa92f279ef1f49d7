// Element-wise and per-row kernels: rms_norm, add, swiglu, sigmoid_mul, argmax_first (rope:
// rope_cuda.cu).
// Arithmetic uses
// the explicit round-to-nearest intrinsics in the CPU kernels' order (no FMA contraction), so
// the only differences from src/kernels/ops.cpp are the device's expf / pow / cos / sin and,
// for rms_norm, the order in which the double sum of squares is added up.
// Every kernel here is launched with launch_pdl (launch_cuda.cuh) and starts with pdl_begin().
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/launch_cuda.cuh"
#include "backends/cuda/norm_cuda.cuh"

namespace geist::cuda {

namespace {

constexpr int kEwThreads = 256;

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
    out[i] = swiglu_elem(gate[i], up[i]);
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

// argmax_first (kernels/ops.h) of x[n]: block b takes the b-th slice and reduces it to the
// (value, index) pair that comes first in the order "larger value, then lower index" (NaN read
// as -inf; +0 == -0 as floats compare), writes it to parts[b], and the last block to count
// itself in reduces the parts and writes *out, then sets *count back to 0. A total order on
// pairs of distinct indices: the answer does not depend on how the slices are reduced.
constexpr int kAmThreads = 256;

__device__ __forceinline__ void am_take(float& bv, int& bi, float v, int i) {
  if (v > bv || (v == bv && i < bi)) {
    bv = v;
    bi = i;
  }
}

// The block's best pair, in thread 0 (every thread calls it).
__device__ __forceinline__ void am_block(float& bv, int& bi, float* sv, int* si) {
  for (int o = 16; o > 0; o >>= 1) {
    am_take(bv, bi, __shfl_xor_sync(0xffffffffu, bv, o), __shfl_xor_sync(0xffffffffu, bi, o));
  }
  const int lane = static_cast<int>(threadIdx.x) & 31, wp = static_cast<int>(threadIdx.x) >> 5;
  if (lane == 0) {
    sv[wp] = bv;
    si[wp] = bi;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kAmThreads / 32; ++w) am_take(bv, bi, sv[w], si[w]);
  }
}

__global__ void __launch_bounds__(kAmThreads)
    argmax_kernel(const float* __restrict__ x, int n, ArgmaxPart* parts, unsigned* count,
                  int32_t* out) {
  __shared__ float sv[kAmThreads / 32];
  __shared__ int si[kAmThreads / 32];
  __shared__ bool last;
  pdl_begin();
  // Row blockIdx.y: its own slice of x, parts, counter and id.
  x += static_cast<int64_t>(blockIdx.y) * n;
  parts += static_cast<int64_t>(blockIdx.y) * kArgmaxParts;
  count += blockIdx.y;
  out += blockIdx.y;
  const int per = (n + static_cast<int>(gridDim.x) - 1) / static_cast<int>(gridDim.x);
  const int lo = static_cast<int>(blockIdx.x) * per;
  const int hi = n - lo < per ? n : lo + per;
  float bv = -INFINITY;
  int bi = INT_MAX;
#pragma unroll 4
  for (int i = lo + static_cast<int>(threadIdx.x); i < hi; i += kAmThreads) {
    const float v = x[i];
    am_take(bv, bi, v != v ? -INFINITY : v, i);
  }
  am_block(bv, bi, sv, si);
  if (threadIdx.x == 0) {
    parts[blockIdx.x] = ArgmaxPart{bv, bi};
    __threadfence();
    last = atomicAdd(count, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  bv = -INFINITY;
  bi = INT_MAX;
  for (int b = static_cast<int>(threadIdx.x); b < static_cast<int>(gridDim.x); b += kAmThreads) {
    const int2 p = __ldcg(reinterpret_cast<const int2*>(parts) + b);  // not through L1
    am_take(bv, bi, __int_as_float(p.x), p.y);
  }
  am_block(bv, bi, sv, si);
  if (threadIdx.x == 0) {
    *out = bi;  // every element beats the (-inf, INT_MAX) start: bi < n
    *count = 0;
  }
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

cudaError_t argmax_first(cudaStream_t s, const float* x, int32_t n, ArgmaxPart* parts,
                         unsigned* count, int32_t* out, int32_t rows) {
  if (n <= 0 || rows <= 0 || rows > 65535) return cudaErrorInvalidValue;
  const int blocks = std::min(kArgmaxParts, (n + kAmThreads * 8 - 1) / (kAmThreads * 8));
  return launch_pdl(argmax_kernel, dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(rows)),
                    dim3(kAmThreads), 0, s, x, n, parts, count, out);
}

}  // namespace geist::cuda
