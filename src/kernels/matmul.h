// Matrix products against GGUF weight matrices of any type quant.h supports, and embedding
// row lookup.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/thread_pool.h"
#include "formats/ggml_type.h"

namespace geist {

// How a weight matrix's bytes are arranged.
//   ROWS: as GGUF stores them, row o at data + o * row_bytes.
//   GROUPS16 (Q8_0, Q4_0, Q4_K and Q6_K; Q5_0 / IQ4_NL, whose values are of Q8_0's form, an
//     integer times an f16 scale, in the Q8P form computed by Q4_0's one-plane formula; and the
//     I8M types below;
//     made at load by weight_to_groups16): rows in
//     groups of 16, the last group padded with zero rows. Group g starts at
//     data + g * 16 * row_bytes.
//     Q8_0 / Q4_0: its block b (32 elements of each of the 16 rows) at + b * 16 * block_bytes
//     holds the 16 rows' f16 scales [16], then their quants in 4-byte units, unit u of row r
//     at 32 + (u * 16 + r) * 4. Q8_0: 8 units per row, each byte stored as w + 128
//     (unsigned); Q4_0: 4 units of the file's nibble bytes.
//     Q4_K / Q6_K: its super-block s (256 elements of each row) at + s * 16 * B (B = 144 /
//     210, the file's bytes per super-block) holds each row's B file bytes, unchanged, as
//     B / 4 4-byte units, unit u of row r at (u * 16 + r) * 4, then (Q6_K) the 2 bytes left,
//     its f16 d, of row r at 52 * 64 + 2 * r. Q4_K units: 0 d and dmin, 1-3 the 12 packed
//     scale bytes, 4 + 8c + i bytes 4i..4i+3 of quant chunk c (low nibbles sub-block 2c, high
//     2c + 1). Q6_K units: ql 0-31, qh 32-47, the 16 int8 scales 48-51.
//     Q5_0 / IQ4_NL (the Q8P form, kernels/simd/matmul_q8_packed.h: the view keeps the type
//     and the file's row_bytes): per block the 16 rows' f16 scales, their nibble units as
//     Q4_0's and (Q5_0) a high-bit word per row; the file's bytes, 1.0x.
//     Q4_1 / Q5_1 / Q5_K / Q2_K / Q3_K / IQ4_XS (the I8M form: the view keeps the file's type,
//     its row_bytes is simd::i8m_row_bytes(type, n_in), the file's): every 32-block of every
//     row as packed codes with an f16 scale and min (Q4_1: the file's nibbles and d, -m; Q5_1:
//     the same and a high-bit plane), or (Q2_K, Q3_K, Q5_K, IQ4_XS) the file's super-blocks
//     transposed in 4-byte units like Q4_K's / Q6_K's; exactly the file's values and bytes
//     (kernels/simd/matmul_simd.h "I8M" has the layouts and the formula; Q3_K's is Q6_K's); the
//     kernels unpack the codes in registers.
//     One 64-byte load is one unit of 16 rows, the operand of a 16-lane 8-bit multiply-add
//     with the activations broadcast (decode), or a K-quant's scale word of 16 rows.
enum class WeightLayout : uint8_t { ROWS, GROUPS16 };

// A weight matrix: n_out rows of n_in elements (ne[0] = n_in).
struct WeightMatrix {
  GgmlType type = GgmlType::F32;
  const uint8_t* data = nullptr;  // ROWS: [n_out][row_bytes], row o encodes W[o][0..n_in)
  int64_t n_in = 0;
  int64_t n_out = 0;
  size_t row_bytes = 0;  // ggml_row_size(type, n_in), in either layout
  WeightLayout layout = WeightLayout::ROWS;
};

// Whether matmul() has kernels for w in the GROUPS16 layout on this CPU (Q8_0 / Q4_0 / Q4_1 /
// Q5_0 / Q5_1 / IQ4_NL rows with n_in % 32 == 0 or Q2_K / Q3_K / Q4_K / Q5_K / Q6_K / IQ4_XS rows
// with n_in % 256 == 0, and the 8-bit multiply-add kernels present). They give the same bits as
// the ROWS layout for Q8_0 / Q4_0 / Q4_K / Q6_K (Q5_0 / IQ4_NL: the one-plane formula on their
// values; the I8M types: their own formula, for Q3_K the bits of Q6_K rows of its values; the
// ROWS layout of these types runs the int16 path) and read the weights about twice as fast at
// decode.
bool weight_groups16_useful(const WeightMatrix& w);
// Bytes of one row of a type-t matrix of n_in columns in the GROUPS16 layout (the file's,
// simd::i8m_row_bytes for the I8M types).
size_t weight_groups16_row_bytes(GgmlType t, int64_t n_in);
// Bytes of w in the GROUPS16 layout: ceil(n_out / 16) * 16 * weight_groups16_row_bytes.
size_t weight_groups16_bytes(const WeightMatrix& w);
// Writes w (ROWS) into dst (weight_groups16_bytes(w) bytes) in the GROUPS16 layout and sets
// *out to the view of dst.
void weight_to_groups16(const WeightMatrix& w, uint8_t* dst, WeightMatrix* out);

// For backends without kernels of their own for a type: the type whose GGUF rows hold every
// value of a type-t row exactly (Q8_0 for Q5_0 and IQ4_NL, Q6_K for Q3_K), or t itself.
// weight_to_exact_rows writes w (ROWS, whole blocks) in that type into dst
// (ggml_row_size(weight_exact_rows_type(w.type), n_in) * n_out bytes) and sets *out to the view
// of dst; its rows dequantize to w's bits.
GgmlType weight_exact_rows_type(GgmlType t);
void weight_to_exact_rows(const WeightMatrix& w, uint8_t* dst, WeightMatrix* out);

// Floats of scratch matmul() needs for rows of n_in elements on n_threads threads (linear in
// n_threads: a caller may size it as n_threads * matmul_scratch_floats(n_in, 1)).
size_t matmul_scratch_floats(int64_t n_in, int n_threads);

// y[t][o] = sum_i x[t][i] * W[o][i] for t < n_tok, o < n_out.
//   x: [n_tok][x_stride], the first w.n_in floats of each row used
//   y: [n_tok][y_stride], the first w.n_out floats of each row written
//   scratch: >= matmul_scratch_floats(w.n_in, pool.n_threads()) floats:
//            [thread][4][n_in] weight buffers, then the quantized activations of one chunk
// SIMD kernels picked at run time (src/kernels/simd/). Where AVX-512 VNNI is present, Q8_0,
// Q4_0, Q4_K and Q6_K weights take the Q8 path: each x row is quantized per 32-element block to
// int8 (steps of 1/127 of the block's max, as llama.cpp does; for Q8_0 weights a second plane
// refines them to 1/(127 * 254)) and dotted with 8-bit multiply-adds, K-quants read in
// super-blocks; so do every other type's GROUPS16 views (the CPU backend makes them at load
// where the VNNI kernels exist). Elsewhere, and for ROWS matrices of the other types, the
// int16 path: x quantized to int16 per block (steps of 1/32767 of the max) and dotted in int32
// per block (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS). F32, F16,
// BF16 and ROWS Q2_K are widened or dequantized to f32 and dotted in f32. Output rows are split
// over the pool's threads in groups of four; long batches run in chunks of 64 rows per thread, each
// chunk reading the weights once. Determinism: y[t][o] is bitwise the same for any n_tok, chunking
// and thread count (it depends on the SIMD target the CPU selects, so two machines may differ in
// the last bits). Does not allocate. w.type must satisfy quant_type_supported (checked at model
// load).
void matmul(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t n_tok, float* y,
            int64_t y_stride, float* scratch, ThreadPool& pool);

// Which activation layout the Q8 path uses for a chunk of tokens: AUTO, what matmul() picks
// (the row layout for up to simd::q8_rows_max tokens, panels beyond); ROWS or PANELS forced, for
// benchmarks and tests (both layouts give the same bits). Other paths ignore it.
enum class Q8Layout : uint8_t { AUTO, ROWS, PANELS };
// matmul() with the Q8 path's layout chosen by the caller; the same contract otherwise.
void matmul_q8_layout(const WeightMatrix& w, const float* x, int64_t x_stride, int64_t n_tok,
                      float* y, int64_t y_stride, float* scratch, ThreadPool& pool,
                      Q8Layout layout);

// dst[0, n_in) = W[row], dequantized (embedding lookup); either layout, the same bits.
void get_row(const WeightMatrix& w, int64_t row, float* dst);

}  // namespace geist
