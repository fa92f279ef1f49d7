// Weight matrix kernels: matmul (dequantize inside the kernel, f32 accumulation) and get_rows.
//
// One warp per output row; a block of kWarps warps shares a shared-memory tile of NT tokens x
// kChunk activations, so each weight element is decoded once per NT tokens. NT = 1 is the
// decode GEMV, larger NT the prefill path. The per-output sum order is the same for every NT
// (see cuda_kernels.h), so a token's logits do not depend on how many tokens came with it.
// Tensor cores come later; this is the correctness baseline.
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_quant.cuh"

namespace geist::cuda {

namespace {

constexpr int kWarps = 8;    // output rows per block
constexpr int kChunk = 256;  // activations per step: 8 per lane
constexpr int kMaxGridY = 65535;

template <GgmlType T, int NT>
__global__ void __launch_bounds__(kWarps * 32)
    matmul_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t n_in, int64_t n_out,
                  const float* __restrict__ x, int64_t x_stride, int32_t n_tok,
                  float* __restrict__ y, int64_t y_stride) {
  __shared__ __align__(16) float xs[NT][kChunk];  // [token][element of the chunk]
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * NT;
  const bool active = o < n_out;
  const uint8_t* row = w + static_cast<size_t>(active ? o : 0) * row_bytes;
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;

  for (int64_t k0 = 0; k0 < n_in; k0 += kChunk) {
    __syncthreads();  // the previous chunk's readers are done
    for (int idx = threadIdx.x; idx < NT * kChunk; idx += blockDim.x) {
      const int t = idx / kChunk;
      const int i = idx % kChunk;
      float v = 0.0f;  // padding: zero weights meet zero activations
      if (t0 + t < n_tok && k0 + i < n_in) v = x[(t0 + t) * x_stride + k0 + i];
      xs[t][i] = v;
    }
    __syncthreads();
    const int64_t i0 = k0 + lane * 8;
    if (active && i0 < n_in) {
      float wv[8];
      WeightDecoder<T>::load8(row, i0, n_in, wv);
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const float4 a = *reinterpret_cast<const float4*>(&xs[t][lane * 8]);
        const float4 b = *reinterpret_cast<const float4*>(&xs[t][lane * 8 + 4]);
        float s = acc[t];
        s = __fmaf_rn(wv[0], a.x, s);
        s = __fmaf_rn(wv[1], a.y, s);
        s = __fmaf_rn(wv[2], a.z, s);
        s = __fmaf_rn(wv[3], a.w, s);
        s = __fmaf_rn(wv[4], b.x, s);
        s = __fmaf_rn(wv[5], b.y, s);
        s = __fmaf_rn(wv[6], b.z, s);
        s = __fmaf_rn(wv[7], b.w, s);
        acc[t] = s;
      }
    }
  }
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    float s = acc[t];
    for (int off = 16; off > 0; off >>= 1) s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, off));
    acc[t] = s;
  }
  if (active && lane == 0) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t0 + t < n_tok) y[(t0 + t) * y_stride + o] = acc[t];
    }
  }
}

template <GgmlType T>
__global__ void get_rows_kernel(const uint8_t* __restrict__ w, size_t row_bytes, int64_t n_in,
                                const int32_t* __restrict__ ids, float* __restrict__ out) {
  const int64_t t = blockIdx.x;
  const uint8_t* row = w + static_cast<size_t>(ids[t]) * row_bytes;
  float* dst = out + t * n_in;  // [n][n_in]
  for (int64_t i0 = static_cast<int64_t>(threadIdx.x) * 8; i0 < n_in;
       i0 += static_cast<int64_t>(blockDim.x) * 8) {
    float wv[8];
    WeightDecoder<T>::load8(row, i0, n_in, wv);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (i0 + j < n_in) dst[i0 + j] = wv[j];
    }
  }
}

template <GgmlType T, int NT>
cudaError_t launch_matmul_nt(cudaStream_t s, const WeightMatrix& w, const float* x,
                             int64_t x_stride, int32_t n_tok, float* y, int64_t y_stride) {
  const int64_t blocks_x = (w.n_out + kWarps - 1) / kWarps;
  if (blocks_x > 0x7fffffff) return cudaErrorInvalidConfiguration;
  // Grid y is capped at 65535 tiles: longer batches go in several launches.
  const int64_t per_launch = static_cast<int64_t>(kMaxGridY) * NT;
  for (int64_t t = 0; t < n_tok; t += per_launch) {
    const int64_t nt = n_tok - t < per_launch ? n_tok - t : per_launch;
    const dim3 grid(static_cast<unsigned>(blocks_x), static_cast<unsigned>((nt + NT - 1) / NT));
    matmul_kernel<T, NT><<<grid, kWarps * 32, 0, s>>>(
        w.data, w.row_bytes, w.n_in, w.n_out, x + t * x_stride, x_stride, static_cast<int32_t>(nt),
        y + t * y_stride, y_stride);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

template <GgmlType T>
cudaError_t launch_matmul_t(cudaStream_t s, const WeightMatrix& w, const float* x, int64_t x_stride,
                            int32_t n_tok, float* y, int64_t y_stride) {
  if (n_tok == 1) return launch_matmul_nt<T, 1>(s, w, x, x_stride, n_tok, y, y_stride);
  if (n_tok <= 4) return launch_matmul_nt<T, 4>(s, w, x, x_stride, n_tok, y, y_stride);
  return launch_matmul_nt<T, 16>(s, w, x, x_stride, n_tok, y, y_stride);
}

template <GgmlType T>
cudaError_t launch_get_rows_t(cudaStream_t s, const WeightMatrix& w, const int32_t* ids, int32_t n,
                              float* out) {
  get_rows_kernel<T><<<n, 128, 0, s>>>(w.data, w.row_bytes, w.n_in, ids, out);
  return cudaGetLastError();
}

}  // namespace

bool weight_type_supported(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q4_K:
    case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

cudaError_t matmul(cudaStream_t s, const WeightMatrix& w, const float* x, int64_t x_stride,
                   int32_t n_tok, float* y, int64_t y_stride) {
  if (n_tok <= 0 || w.n_out <= 0) return cudaSuccess;
  switch (w.type) {
    case GgmlType::F32:
      return launch_matmul_t<GgmlType::F32>(s, w, x, x_stride, n_tok, y, y_stride);
    case GgmlType::F16:
      return launch_matmul_t<GgmlType::F16>(s, w, x, x_stride, n_tok, y, y_stride);
    case GgmlType::BF16:
      return launch_matmul_t<GgmlType::BF16>(s, w, x, x_stride, n_tok, y, y_stride);
    case GgmlType::Q8_0:
      return launch_matmul_t<GgmlType::Q8_0>(s, w, x, x_stride, n_tok, y, y_stride);
    case GgmlType::Q4_0:
      return launch_matmul_t<GgmlType::Q4_0>(s, w, x, x_stride, n_tok, y, y_stride);
    case GgmlType::Q4_K:
      return launch_matmul_t<GgmlType::Q4_K>(s, w, x, x_stride, n_tok, y, y_stride);
    case GgmlType::Q6_K:
      return launch_matmul_t<GgmlType::Q6_K>(s, w, x, x_stride, n_tok, y, y_stride);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t get_rows(cudaStream_t s, const WeightMatrix& w, const int32_t* ids, int32_t n,
                     float* out) {
  if (n <= 0) return cudaSuccess;
  switch (w.type) {
    case GgmlType::F32:
      return launch_get_rows_t<GgmlType::F32>(s, w, ids, n, out);
    case GgmlType::F16:
      return launch_get_rows_t<GgmlType::F16>(s, w, ids, n, out);
    case GgmlType::BF16:
      return launch_get_rows_t<GgmlType::BF16>(s, w, ids, n, out);
    case GgmlType::Q8_0:
      return launch_get_rows_t<GgmlType::Q8_0>(s, w, ids, n, out);
    case GgmlType::Q4_0:
      return launch_get_rows_t<GgmlType::Q4_0>(s, w, ids, n, out);
    case GgmlType::Q4_K:
      return launch_get_rows_t<GgmlType::Q4_K>(s, w, ids, n, out);
    case GgmlType::Q6_K:
      return launch_get_rows_t<GgmlType::Q6_K>(s, w, ids, n, out);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace geist::cuda
