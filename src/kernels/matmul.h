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

// Floats of scratch matmul() needs for rows of n_in elements on n_threads threads.
size_t matmul_scratch_floats(int64_t n_in, int n_threads);

// y[t][o] = sum_i x[t][i] * W[o][i] for t < n_tok, o < n_out.
//   x: [n_tok][x_stride], the first w.n_in floats of each row used
//   y: [n_tok][y_stride], the first w.n_out floats of each row written
//   scratch: >= matmul_scratch_floats(w.n_in, pool.n_threads()) floats, [thread][4][n_in]
// Each weight row is dequantized once per call into the calling thread's scratch and dotted
// with every token, so prefill reads the weights once. Output rows are split over the pool's
// threads in groups of four; y[t][o] is bitwise the same for any n_tok and thread count.
// Does not allocate. w.type must satisfy quant_type_supported (checked at model load).
void matmul(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t n_tok, float* y,
            int64_t y_stride, float* scratch, ThreadPool& pool);

// dst[0, n_in) = W[row], dequantized (embedding lookup).
void get_row(const WeightMatrix& w, int64_t row, float* dst);

}  // namespace geist
