// Device helpers shared by the kernels that normalise a row with rms_norm()'s arithmetic and
// order (ops_cuda.cu: rms_norm_kernel; rope_cuda.cu: the heads' norms in front of rope), and the
// element expression of swiglu (ops_cuda.cu, and the down projection that reads swiglu's
// values as it loads its activations, matmul_q8_cuda.cu). One definition, so that every fused
// kernel is bitwise the separate launches.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace geist::cuda {

constexpr int kNormPer = 8;  // row elements a thread holds in registers per pass

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

// swiglu()'s element: silu(g) * u with the CPU kernel's roundings (no FMA contraction).
__device__ __forceinline__ float swiglu_elem(float g, float u) {
  const float silu = __fdiv_rn(g, __fadd_rn(1.0f, expf(-g)));
  return __fmul_rn(silu, u);
}

}  // namespace geist::cuda
