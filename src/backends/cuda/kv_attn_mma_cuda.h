// The tensor-core attention path of kv_attention (kv_attn_mma_cuda.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/cuda_kernels.h"

namespace geist::cuda {

// Raises the kernels' shared-memory limit; once per process, from kv_attention_setup().
cudaError_t kv_attention_mma_setup();

// kv_attention for F16 / F32 rows (no key reference) with head_dim_k == head_dim_v in
// {64, 128, 256}: false (nothing launched) when the cache or shape is not such, a function of
// those alone so that every call of one cache takes the same path; else launches and sets
// *err.
bool kv_attention_mma(cudaStream_t s, const AttentionShape& sh, const float* q, int64_t q_stride,
                      int32_t n_tok, int32_t pos0, const KvDevSrc& k, const KvDevSrc& v, float* out,
                      int64_t out_stride, const int32_t* pos_dev, cudaError_t* err);

}  // namespace geist::cuda
