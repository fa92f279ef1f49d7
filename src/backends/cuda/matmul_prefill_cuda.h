// The tiled prefill matmul (matmul_prefill_cuda.cu) of the 8-bit path (Q8_0, Q4_0: activations
// quantized to int8, int8 tensor cores; matmul_q8_cuda.cu states the arithmetic).
// cuda::matmul() sends batches of more than 8 tokens of these types here; tests call it
// directly to pin a tile size.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/cuda_kernels.h"
#include "formats/ggml_type.h"
#include "kernels/matmul.h"

namespace geist::cuda {

// Q8_0: LARGE 128 rows x 128 tokens per block (8 warps), MEDIUM 128 x 64 (8 warps), SMALL
// 64 x 64 (4 warps), TINY 32 x 32 (4 warps); Q4_0: LARGE 128 x 128, MEDIUM and SMALL 64 x 64,
// TINY 32 x 32. AUTO: the tile of least estimated time for the shape (matmul_prefill_cuda.cu).
// Every choice writes the same bits.
enum class PrefillTile { AUTO, LARGE, MEDIUM, SMALL, TINY };

bool matmul_prefill_supported(GgmlType t);

// Device scratch matmul_prefill needs to take n_tok tokens in one round (the activations'
// int8 codes and steps); 0 for unsupported types.
size_t matmul_prefill_scratch_bytes(GgmlType t, int64_t n_in, int32_t n_tok);

// y[t][o] = sum_i x[t][i] * W[o][i] for t < n_tok, bitwise what the decode kernel of matmul()
// gives each token alone. w is a device copy made by upload_weight; only types with
// matmul_prefill_supported(). scratch: device bytes [scratch_bytes]; a scratch smaller than
// matmul_prefill_scratch_bytes(n_tok) takes the tokens in rounds (cudaErrorInvalidValue when it
// cannot hold one token). Enqueued on s; the scratch is in use until the launches finish.
cudaError_t matmul_prefill(cudaStream_t s, const WeightMatrix& w, const float* x, int64_t x_stride,
                           int32_t n_tok, float* y, int64_t y_stride, void* scratch,
                           size_t scratch_bytes, PrefillTile tile = PrefillTile::AUTO);

// matmul_prefill() of several weights over the same activations (a layer's q / k / v, or gate
// and up): one quantization of x per round for all of them; each y bitwise what
// matmul_prefill() writes alone. All of one type and n_in (cudaErrorInvalidValue otherwise).
cudaError_t matmul_prefill_batch(cudaStream_t s, const MatmulOut* outs, int n, const float* x,
                                 int64_t x_stride, int32_t n_tok, void* scratch,
                                 size_t scratch_bytes, PrefillTile tile = PrefillTile::AUTO);

// matmul_prefill() of gate and up, then swiglu(gate.y, up.y, out) over n_tok rows of n_out, in
// one launch per round: each block multiplies the gate and up rows of the same columns and
// takes swiglu in registers. Bitwise the separate launches: gate.y and up.y get the matmuls'
// values (except one that is out), out swiglu()'s. Only where matmul_prefill_swiglu_ok: both
// Q8_0 of the same shape. out is gate.y, up.y, or apart from both; x apart from all three.
// TINY is not a tile of this kernel (AUTO or TINY: the estimated best of the others).
bool matmul_prefill_swiglu_ok(const WeightMatrix& gate, const WeightMatrix& up);
cudaError_t matmul_prefill_swiglu(cudaStream_t s, const MatmulOut& gate, const MatmulOut& up,
                                  const float* x, int64_t x_stride, int32_t n_tok, float* out,
                                  int64_t out_stride, void* scratch, size_t scratch_bytes,
                                  PrefillTile tile = PrefillTile::AUTO);

}  // namespace geist::cuda
