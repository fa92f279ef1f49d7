// Launchers of the CUDA backend's kernels (matmul_cuda.cu, ops_cuda.cu, kv_cuda.cu), callable
// from host C++. Every pointer is a device address; shapes as in the named CPU kernel.
// Each launcher enqueues on stream s and returns the launch status (cudaGetLastError), so a
// bad configuration is reported where it happens; execution errors surface at the next
// synchronizing call.
//
// Determinism: each output element is computed by a fixed sequence of f32 operations that
// depends only on its inputs and the sizes that shape it (n_in, head_dim, ...), never on
// n_tok, the tiling or timing: no atomics, reductions in a fixed tree order, FMAs explicit.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "formats/ggml_type.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace geist::cuda {

// The weight types the matmul / get_rows kernels decode.
bool weight_type_supported(GgmlType t);

// y[t][o] = sum_i x[t][i] * W[o][i] (kernels/matmul.h matmul()), W in its GGUF blocks on the
// device. Accumulation per output: lane l of a warp sums elements [256c + 8l, 256c + 8l + 8)
// of each 256-chunk c in index order with FMAs, then the 32 lanes combine by a xor tree.
cudaError_t matmul(cudaStream_t s, const WeightMatrix& w, const float* x, int64_t x_stride,
                   int32_t n_tok, float* y, int64_t y_stride);

// out[t][0, n_in) = row ids[t] of W, dequantized bitwise as dequantize_row() does.
// ids: [n] device ints, each < w.n_out.
cudaError_t get_rows(cudaStream_t s, const WeightMatrix& w, const int32_t* ids, int32_t n,
                     float* out);

// rms_norm() per row: sum of squares in double (each of 256 threads sums a strided subset in
// index order, then a fixed tree), the rest in f32 as the CPU kernel.
cudaError_t rms_norm(cudaStream_t s, const float* x, int64_t x_stride, const float* w, float* y,
                     int64_t y_stride, int32_t n_rows, int64_t n, float eps);

// rope() for n_tok tokens at positions pos0 + t; angles in double. p.freq_factors is a device
// address or nullptr.
cudaError_t rope(cudaStream_t s, float* x, int64_t x_stride, int32_t n_tok, int32_t n_head,
                 int32_t head_dim, int32_t pos0, const RopeParams& p);

cudaError_t add(cudaStream_t s, float* y, const float* x, int64_t n);
cudaError_t swiglu(cudaStream_t s, const float* gate, const float* up, float* out, int64_t n);
cudaError_t sigmoid_mul(cudaStream_t s, float* x, int64_t x_stride, const float* gate,
                        int64_t gate_stride, int32_t n_rows, int64_t n);

// Stores n rows of n_embd floats (row i at src + i * src_stride) as rows of dst (row i at
// dst + i * n_embd elements), f32 or f16 (round to nearest even).
cudaError_t kv_store_rows(cudaStream_t s, bool f16, const float* src, int64_t src_stride, int32_t n,
                          int32_t n_embd, void* dst);

// attention_kv() over K/V rows stored contiguously from position 0 (row p of K at
// k + p * n_embd_k elements, f32 or f16), causal for the queries at pos0 + t, t < n_tok.
// Online softmax over tiles of 128 positions in position order (max subtraction, f32).
cudaError_t kv_attention(cudaStream_t s, bool f16, const AttentionShape& sh, const float* q,
                         int64_t q_stride, int32_t n_tok, int32_t pos0, const void* k,
                         int32_t n_embd_k, const void* v, int32_t n_embd_v, float* out,
                         int64_t out_stride);

}  // namespace geist::cuda
