// Element-wise and per-row kernels: rms_norm, rope, add, swiglu, sigmoid_mul. Arithmetic uses
// the explicit round-to-nearest intrinsics in the CPU kernels' order (no FMA contraction), so
// the only differences from src/kernels/ops.cpp are the device's expf / pow / cos / sin and,
// for rms_norm, the order in which the double sum of squares is added up.
#include "backends/cuda/cuda_kernels.h"

namespace geist::cuda {

namespace {

constexpr int kNormThreads = 256;
constexpr int kEwThreads = 256;

// RES: x[r] += res[r] first (the residual add fused in front; rows contiguous). Each thread
// adds, squares and later rewrites only its own elements, so x, y and res may alias row for
// row, and the result is bitwise that of add_kernel followed by the plain kernel.
template <bool RES>
__global__ void __launch_bounds__(kNormThreads)
    rms_norm_kernel(float* x, int64_t x_stride, const float* res, const float* __restrict__ w,
                    float* y, int64_t y_stride, int64_t n, float eps) {
  __shared__ double part[kNormThreads];
  float* xr = x + static_cast<int64_t>(blockIdx.x) * x_stride;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * y_stride;
  // x * x of two floats is exact in double, so only the additions round (in this order).
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += kNormThreads) {
    float xv = xr[i];
    if constexpr (RES) {
      xv = __fadd_rn(xv, res[static_cast<int64_t>(blockIdx.x) * n + i]);
      xr[i] = xv;
    }
    const double v = xv;
    s = __dadd_rn(s, __dmul_rn(v, v));
  }
  part[threadIdx.x] = s;
  __syncthreads();
  for (int off = kNormThreads / 2; off > 0; off >>= 1) {
    if (static_cast<int>(threadIdx.x) < off) {
      part[threadIdx.x] = __dadd_rn(part[threadIdx.x], part[threadIdx.x + off]);
    }
    __syncthreads();
  }
  const float mean = static_cast<float>(part[0] / static_cast<double>(n));
  const float scale = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, eps)));
  // Each thread rewrites only the elements it read: x and y may alias.
  for (int64_t i = threadIdx.x; i < n; i += kNormThreads) {
    const float v = __fmul_rn(xr[i], scale);
    yr[i] = w != nullptr ? __fmul_rn(v, w[i]) : v;
  }
}

// One thread per (token, pair); it turns that pair in every head.
__global__ void rope_kernel(float* x, int64_t x_stride, int32_t n_tok, int32_t n_head,
                            int32_t head_dim, int32_t pos0, int32_t n_rot, int32_t neox,
                            float freq_base, float freq_scale,
                            const float* __restrict__ freq_factors) {
  const int32_t half = n_rot / 2;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<int64_t>(n_tok) * half) return;
  const int32_t t = static_cast<int32_t>(idx / half);
  const int32_t i = static_cast<int32_t>(idx % half);
  const int32_t pos = pos0 + t;
  double theta = static_cast<double>(pos) * static_cast<double>(freq_scale) *
                 pow(static_cast<double>(freq_base), -2.0 * i / n_rot);
  if (freq_factors != nullptr) theta /= static_cast<double>(freq_factors[i]);
  const float c = static_cast<float>(cos(theta));
  const float sn = static_cast<float>(sin(theta));
  const int32_t first = neox ? i : 2 * i;
  const int32_t second = neox ? i + half : 2 * i + 1;
  float* xt = x + static_cast<int64_t>(t) * x_stride;
  for (int32_t h = 0; h < n_head; ++h) {
    float* a = xt + static_cast<int64_t>(h) * head_dim + first;
    float* b = xt + static_cast<int64_t>(h) * head_dim + second;
    const float x0 = *a;
    const float x1 = *b;
    *a = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, sn));
    *b = __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, c));
  }
}

__global__ void add_kernel(float* y, const float* x, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = __fadd_rn(y[i], x[i]);
  }
}

__device__ __forceinline__ float sigmoid_dev(float v) {
  return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-v)));
}

__global__ void swiglu_kernel(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    const float silu = __fdiv_rn(g, __fadd_rn(1.0f, expf(-g)));
    out[i] = __fmul_rn(silu, up[i]);
  }
}

__global__ void sigmoid_mul_kernel(float* x, int64_t x_stride, const float* gate,
                                   int64_t gate_stride, int32_t n_rows, int64_t n) {
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

cudaError_t rms_norm(cudaStream_t s, const float* x, int64_t x_stride, const float* w, float* y,
                     int64_t y_stride, int32_t n_rows, int64_t n, float eps) {
  if (n_rows <= 0 || n <= 0) return cudaSuccess;
  // x is only read here; the kernel's pointer is non-const for the fused variant.
  rms_norm_kernel<false><<<n_rows, kNormThreads, 0, s>>>(const_cast<float*>(x), x_stride, nullptr,
                                                         w, y, y_stride, n, eps);
  return cudaGetLastError();
}

cudaError_t add_rms_norm(cudaStream_t s, float* x, const float* res, const float* w, float* y,
                         int64_t y_stride, int32_t n_rows, int64_t n, float eps) {
  if (n_rows <= 0 || n <= 0) return cudaSuccess;
  rms_norm_kernel<true><<<n_rows, kNormThreads, 0, s>>>(x, n, res, w, y, y_stride, n, eps);
  return cudaGetLastError();
}

cudaError_t rope(cudaStream_t s, float* x, int64_t x_stride, int32_t n_tok, int32_t n_head,
                 int32_t head_dim, int32_t pos0, const RopeParams& p) {
  if (n_tok <= 0 || p.n_rot <= 0 || p.n_rot % 2 != 0 || p.n_rot > head_dim) {
    return n_tok <= 0 ? cudaSuccess : cudaErrorInvalidValue;
  }
  const int64_t total = static_cast<int64_t>(n_tok) * (p.n_rot / 2);
  const int threads = 128;
  const int64_t blocks = (total + threads - 1) / threads;
  rope_kernel<<<static_cast<unsigned>(blocks), threads, 0, s>>>(
      x, x_stride, n_tok, n_head, head_dim, pos0, p.n_rot, p.style == RopeStyle::NEOX ? 1 : 0,
      p.freq_base, p.freq_scale, p.freq_factors);
  return cudaGetLastError();
}

cudaError_t add(cudaStream_t s, float* y, const float* x, int64_t n) {
  if (n <= 0) return cudaSuccess;
  add_kernel<<<ew_blocks(n), kEwThreads, 0, s>>>(y, x, n);
  return cudaGetLastError();
}

cudaError_t swiglu(cudaStream_t s, const float* gate, const float* up, float* out, int64_t n) {
  if (n <= 0) return cudaSuccess;
  swiglu_kernel<<<ew_blocks(n), kEwThreads, 0, s>>>(gate, up, out, n);
  return cudaGetLastError();
}

cudaError_t sigmoid_mul(cudaStream_t s, float* x, int64_t x_stride, const float* gate,
                        int64_t gate_stride, int32_t n_rows, int64_t n) {
  if (n_rows <= 0 || n <= 0) return cudaSuccess;
  sigmoid_mul_kernel<<<ew_blocks(n_rows * n), kEwThreads, 0, s>>>(x, x_stride, gate, gate_stride,
                                                                  n_rows, n);
  return cudaGetLastError();
}

}  // namespace geist::cuda
