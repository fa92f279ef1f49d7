// Internal to the 8-bit decode matmuls (matmul_q8_cuda.cu: the dispatch and decode_kernel;
// gemv_q8_cuda.cu: the one- and two-token GEMVs and their fused launches; gemv_rows_q8_cuda.cu:
// the 3-to-8-token GEMV): the batch of matrices one launch reads and the numbering of its blocks.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/matmul_common.cuh"

namespace geist::cuda::q8 {

using mm::DevW;

constexpr int kDecRows = 16;  // rows per block of both decode kernels (one block numbering)

// Up to kMaxMatmulBatch matrices of one type and n_in over the same activations: matrix i takes
// the blocks from first[i] on.
struct DecBatch {
  DevW w[kMaxMatmulBatch];
  float* y[kMaxMatmulBatch];
  int64_t y_stride[kMaxMatmulBatch];
  int64_t first[kMaxMatmulBatch];
  int n;
};

// The matrix of this block (the last one whose blocks start at or before blockIdx.x).
__device__ __forceinline__ void select_matrix(const DecBatch& bt, DevW* w, float** y,
                                              int64_t* y_stride, int64_t* first) {
  *w = bt.w[0];
  *y = bt.y[0];
  *y_stride = bt.y_stride[0];
  *first = 0;
#pragma unroll
  for (int i = 1; i < kMaxMatmulBatch; ++i) {
    if (i < bt.n && static_cast<int64_t>(blockIdx.x) >= bt.first[i]) {
      *w = bt.w[i];
      *y = bt.y[i];
      *y_stride = bt.y_stride[i];
      *first = bt.first[i];
    }
  }
}

// The one- or two-token GEMV (gemv_q8_cuda.cu) for the batch b of blocks rows-of-16 blocks, all
// of type t (Q8_0 or Q4_0): launched and its status returned when its shared memory fits
// within 48 KB; else false (nothing launched).
bool gemv_launch(cudaStream_t s, GgmlType t, const DecBatch& b, int64_t blocks, const float* x,
                 int64_t x_stride, int32_t n_tok, bool vec, cudaError_t* err);

// Device bytes of the activation codes the three- to eight-token GEMV reads (rows_launch's
// scratch) for n_tok tokens of n_in, either weight type; 0 where it does not run.
size_t rows_scratch_bytes(int32_t n_tok, int64_t n_in);

// The three- to eight-token GEMV (gemv_rows_q8_cuda.cu) for the same batch, its activations
// quantized into scratch by a launch of their own: launched and its status returned; false
// (nothing launched) for other token counts or a scratch under rows_scratch_bytes.
bool rows_launch(cudaStream_t s, GgmlType t, const DecBatch& b, int64_t groups, const float* x,
                 int64_t x_stride, int32_t n_tok, bool vec, void* scratch, size_t scratch_bytes,
                 cudaError_t* err);

}  // namespace geist::cuda::q8
