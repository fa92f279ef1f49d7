// The tiled prefill matmul (matmul_prefill_cuda.cu) of the weight types that are an integer
// times a block scale (Q8_0, Q4_0). cuda::matmul() sends batches of more than 8 tokens of these
// types here; tests call it directly to pin a tile size.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "formats/ggml_type.h"
#include "kernels/matmul.h"

namespace geist::cuda {

// LARGE: 128 rows x 128 tokens per block; SMALL: 64 x 64 (more blocks for small matrices);
// AUTO: LARGE when it alone fills every multiprocessor. Every choice writes the same bits.
enum class PrefillTile { AUTO, LARGE, SMALL };

bool matmul_prefill_supported(GgmlType t);

// y[t][o] = sum_i x[t][i] * W[o][i] for t < n_tok, bitwise what the decode kernels of
// matmul() give each token alone (matmul_cuda.cu's header comment fixes that arithmetic).
// w is a device copy made by upload_weight; only types with matmul_prefill_supported().
cudaError_t matmul_prefill(cudaStream_t s, const WeightMatrix& w, const float* x, int64_t x_stride,
                           int32_t n_tok, float* y, int64_t y_stride,
                           PrefillTile tile = PrefillTile::AUTO);

}  // namespace geist::cuda
