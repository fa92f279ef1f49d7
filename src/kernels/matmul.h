// Matrix products against GGUF weight matrices of any type quant.h supports, and embedding
// row lookup.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/thread_pool.h"
#include "formats/ggml_type.h"

namespace geist {

// A weight matrix as GGUF stores it: n_out rows of n_in elements (ne[0] = n_in), row-major.
struct WeightMatrix {
  GgmlType type = GgmlType::F32;
  const uint8_t* data = nullptr;  // [n_out][row_bytes], row o encodes W[o][0..n_in)
  int64_t n_in = 0;
  int64_t n_out = 0;
  size_t row_bytes = 0;  // ggml_row_size(type, n_in)
};

// Floats of scratch matmul() needs for rows of n_in elements on n_threads threads (linear in
// n_threads: a caller may size it as n_threads * matmul_scratch_floats(n_in, 1)).
size_t matmul_scratch_floats(int64_t n_in, int n_threads);

// y[t][o] = sum_i x[t][i] * W[o][i] for t < n_tok, o < n_out.
//   x: [n_tok][x_stride], the first w.n_in floats of each row used
//   y: [n_tok][y_stride], the first w.n_out floats of each row written
//   scratch: >= matmul_scratch_floats(w.n_in, pool.n_threads()) floats:
//            [thread][4][n_in] weight buffers, then the quantized activations of one chunk
// SIMD kernels picked at run time (src/kernels/simd/). Q8_0 and Q4_0 weights take the Q8 path:
// each x row is quantized per 32-element block into two int8 planes (steps of 1/(127 * 254) of
// the block's max) and dotted with 8-bit multiply-adds (AVX-512 VNNI where present). Q4_K and
// Q6_K take the int16 path: x quantized to int16 per block (steps of 1/32767 of the max) and
// dotted in int32 per block. Both are far finer than llama.cpp's 8-bit activations. Other types are
// widened or dequantized to f32 and dotted in f32. Output rows are split over the pool's
// threads in groups of four; long batches run in chunks of 64 rows per thread, each chunk
// reading the weights once.
// Determinism: y[t][o] is bitwise the same for any n_tok, chunking and thread count (it
// depends on the SIMD target the CPU selects, so two machines may differ in the last bits).
// Does not allocate. w.type must satisfy quant_type_supported (checked at model load).
void matmul(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t n_tok, float* y,
            int64_t y_stride, float* scratch, ThreadPool& pool);

// dst[0, n_in) = W[row], dequantized (embedding lookup).
void get_row(const WeightMatrix& w, int64_t row, float* dst);

}  // namespace geist
