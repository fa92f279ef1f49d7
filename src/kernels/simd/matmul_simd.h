// Highway kernels behind matmul(): run-time dispatched to the best SIMD target of the CPU
// (AVX-512, AVX2+FMA, SSE4, NEON; EMU128 as the portable fallback). Private to
// src/kernels; matmul.cpp is the only caller outside the tests.
//
// The integer path works on weight rows unpacked to int16 ("I16 rows") and activation rows
// quantized to int16 per 32-element block ("Q16 rows"):
//   W[o][i] ~= dw[o][i/32] * w16[o][i] + (min term)
//   x[t][i] ~= dx[t][i/32] * q16[t][i]
// so sum_i W[o][i] x[t][i] = sum_b dw*dx*isum_b + sum_b mw[o][b] * sx[t][b], where isum_b is
// the exact int32 dot of block b and sx[t][b] = dx * sum(q16 of block b). 16-bit activations
// cost nothing over 8-bit ones here (both go through a 16x16->32 multiply-add), and keep the
// product within f32 rounding of the unquantized one.
//
// Determinism: each output's operation order depends only on n_in and the SIMD target, never
// on how many rows or tokens are processed together.
#pragma once

#include <cstddef>
#include <cstdint>

#include "formats/ggml_type.h"

namespace geist::simd {

constexpr int64_t kQ16Block = 32;  // activation / unpacked weight block

// True for the weight types the integer path unpacks: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q3_K, Q4_K,
// Q5_K, Q6_K, IQ4_NL, IQ4_XS (not Q2_K: its mins change every 16 elements, finer than mw).
bool int16_path_supported(GgmlType t);
// True for those of them whose unpacked rows have an offset term mw (Q4_1, Q5_1, Q4_K, Q5_K);
// the others' mw is all zeros and the dot kernels may skip it (mw == nullptr).
bool int16_has_min(GgmlType t);

// Unpacks `count` consecutive weight rows (row r at src + r * row_bytes, n_in elements,
// n_in % 32 == 0) of a type int16_path_supported accepts.
//   w16: [count][n_in]; dw, mw: [count][n_in / 32]
void unpack_rows_i16(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                     int16_t* w16, float* dw, float* mw);

// unpack_rows_i16 for the types added later (Q4_1, Q5_0, Q5_1, Q3_K, Q5_K, IQ4_NL, IQ4_XS;
// src/kernels/simd/unpack_i16_simd.cpp). Integer values only: the same on every target.
void unpack_rows_i16_more(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                          int16_t* w16, float* dw, float* mw);

// Quantizes one activation row of n_in (% 32 == 0) floats: q16 [n_in], dx and sx [n_in / 32].
// Scalar and target-independent: the same bits on every machine.
void quantize_row_q16(const float* x, int64_t n_in, int16_t* q16, float* dx, float* sx);

// out[r] = dot of unpacked weight row r (< count <= 4) with one Q16 activation row.
//   w16: [count][n_in]; dw, mw: [count][n_in / 32]; q16: [n_in]; dx, sx: [n_in / 32]
// mw may be nullptr when the type has no min term (all but Q4_K).
void dot_i16_rows(const int16_t* w16, const float* dw, const float* mw, int count, int64_t n_in,
                  const int16_t* q16, const float* dx, const float* sx, float* out);

// dot_i16_rows for n_tok activation rows at once, in register tiles of rows x tokens (prefill):
// out[t * out_stride + r] gets bitwise what dot_i16_rows gives for token t alone.
//   q16: [n_tok][n_in]; dx, sx: [n_tok][n_in / 32]; out: [n_tok][out_stride]
void dot_i16_batch(const int16_t* w16, const float* dw, const float* mw, int count, int64_t n_in,
                   const int16_t* q16, const float* dx, const float* sx, int64_t n_tok, float* out,
                   int64_t out_stride);

// True for Q8_0 and Q4_0, which dot_packed_rows reads directly.
bool packed_dot_supported(GgmlType t);

// The same as unpack_rows_i16 followed by dot_i16_rows (bitwise), reading the packed rows
// directly: for decode, where each unpacked row would be used once.
void dot_packed_rows(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                     const int16_t* q16, const float* dx, float* out);

// --- Q8 path (Q8_0, Q4_0, Q4_K, Q6_K weights, src/kernels/simd/matmul_q8_simd.cpp) ---
// Activations quantized per 32-block to int8: q1 = round(x / d), d = max|x| / 127 (llama.cpp's
// q8_0 codes). Q8_0 weights add a second plane, q2 = round((x - d * q1) / dx) with
// dx = d / kQ8Fine, so x ~= dx * (kQ8Fine * q1 + q2) within dx / 2: as fine as 16-bit codes
// (q1 alone measurably worsened the q8_0 fixture logits). Q4_0 weights take q1 alone: their own
// step (max / 8) is 16x coarser than q1's, so a finer activation changes the product's error
// by well under a percent while costing twice the multiply-adds (q8_planes; measured in
// docs/BENCHMARKS.md); so do Q5_0 and IQ4_NL in GROUPS16 (matmul_q8_packed.h). Every output
// is, bitwise, on every target and for any batch:
//   acc = 0; for b in blocks: acc = fma(float(isum_b), dw_b * dx_b, acc); y = acc
// with isum_b = kQ8Fine * dot(w, q1) + dot(w, q2) (two planes) or dot(w, q1) (one plane, and
// then dx_b = d_b), exact in int32, w the block's signed weight codes, dw_b its f16 scale. sx is
// the block's sum of the codes (kQ8Fine * q1 + q2, or q1). AVX-512 VNNI computes the dots with
// vpdpbusd; others with loops.
constexpr int64_t kQ8Panel = 16;  // tokens per activation panel (one 512-bit vector of lanes)
constexpr int32_t kQ8Fine = 254;  // fine steps per coarse step

//
// K-quants (Q4_K, Q6_K; src/kernels/simd/matmul_kq_simd.cpp, matmul_kq_groups_simd.cpp) read
// the weights in the file's super-blocks or in the GROUPS16 layout of kernels/matmul.h
// with one activation plane (dx_b = d_b, sx_b = sum of q1):
//   Q4_K, 32-block b = sub-block j of its super-block (f16 d, dmin; 6-bit sc_j, m_j), u the
//   4-bit codes: isum_b = dot(u, q1), and per block, in block order,
//     acc = fma(float(isum_b), (d * sc_j) * dx_b, acc)
//     acc = fma(dmin * m_j, -(float(sx_b) * dx_b), acc)
//   (d * sc_j and dmin * m_j are exact in f32: an f16 times a 6-bit integer).
//   Q6_K, 32-block b = sub-blocks s, s + 1 of 16 (int8 scales sc_s, sc_s1; f16 d), u the 6-bit
//   codes: isum_b = sc_s * dot16(u - 32, q1) + sc_s1 * dot16'(u - 32, q1), exact, then
//     acc = fma(float(isum_b), d * dx_b, acc)
//   |isum_b| < 2^24, so an exact f32 evaluation of it is also allowed. Kernels take the -32
//   from the activations' 16-element sums (q8_half_sums_*), written where the unused q2 plane
//   would be.
bool q8_path_supported(GgmlType t);  // Q8_0, Q4_0, Q4_K, Q6_K

// Activation planes the Q8 path uses for weights of type t: 2 for Q8_0, 1 for the 4-bit, 5-bit
// and 6-bit types (their own steps are 16x / 8x / 4x coarser than q1's; Q5_0 / IQ4_NL in
// GROUPS16 take Q4_0's one-plane formula on their values: matmul_q8_packed.h).
inline int q8_planes(GgmlType t) { return t == GgmlType::Q8_0 ? 2 : 1; }

// Q6_K's activation extras, after quantize_row_q8 / _panel with one plane: the sums of q1 over
// each 16-element half of every 32-block.
//   row:   reads q[0, n_in), writes int32 hs [nb][2] at q + n_in (the q2 plane's place)
//   panel: reads lane `lane` of the panel at pq, writes int32 phs [nb][2][16] (half h of block b,
//          lane j at (b * 2 + h) * 16 + j) at pq + nb * 512 bytes (the q2 plane's place)
void q8_half_sums_row(int8_t* q, int64_t n_in);
void q8_half_sums_panel(int8_t* pq, int64_t nb, int64_t lane);

// The K-quant kernels behind dot_q8_rows / dot_q8_panels (same arguments).
void dot_kq_rows(GgmlType t, bool groups, const uint8_t* src, size_t row_bytes, int count,
                 int64_t n_in, const int8_t* q, const float* dx, const int32_t* sx, int64_t n_tok,
                 float* out, int64_t out_stride);
void dot_kq_panels(GgmlType t, bool groups, const uint8_t* src, size_t row_bytes, int count,
                   int64_t n_in, const int8_t* pq, const float* pdx, const int32_t* psx,
                   int64_t n_tok, float* out, int64_t out_stride);

// I8M (Q4_1, Q5_1, Q5_K, Q2_K, Q3_K, IQ4_XS in the GROUPS16 layout, re-encoded at load by
// weight_to_groups16: src/kernels/weight_i8m.cpp; kernels in matmul_i8m_simd.cpp and
// matmul_i8m_packed_simd.cpp). Every 32-block of every row is, in the formula, 8-bit codes w[32],
// an f32 scale S, an f32 min scale M and two int16 min weights m0, m1 (of the block's 16-element
// halves), value = S * w - M * m_h, all exact re-encodings of the file's values (Q4_1 / Q5_1: S =
// d, M = -m, m0 = m1 = 1; Q5_K: S = d * sc_j, M = dmin * m_j, m0 = m1 = 1; Q2_K: w = sc * q, S = d,
// M = dmin, m_h = the two 16-element mins; Q3_K: w = (s_h - 32) * code with s_h the 6-bit scale of
// the half, S = d, no min (this is Q6_K's formula on Q3_K's values, the bits Q3_K had as Q6_K);
// IQ4_XS: w = the non-linear value, S = d * (ls - 32), no min). One activation plane (dx_b = d_b)
// and its half sums (q8_half_sums_*: hs0, hs1). Every output is, bitwise, on every target and for
// any batch:
//   acc = 0; for b in blocks: isum = dot(w, q1), ms = m0 * hs0 + m1 * hs1 (exact int32)
//     acc = fma(float(isum), S * dx_b, acc)
//     acc = fma(M, -(float(ms) * dx_b), acc)      (omitted for IQ4_XS and Q3_K: no min)
// The forms keep the file's codes packed, so that decode reads no more bytes than the file's
// (the kernels unpack them in registers). The per-block forms hold a group's block b (16 rows,
// i8m_group_block bytes at group + b * i8m_group_block) as the 16 rows' f16 S (row r at
// kI8mScaleAt + 2r) and f16 M (at kI8mMinAt + 2r), then 4 code units of nibbles, unit u of row r
// at i8m_codes_at + (u * 16 + r) * 4 with elements 4u..4u+3 in its low nibbles and 16 + 4u.. in
// its high ones (the file's qs bytes 4u..4u+3). NIBBLES (Q4_1: S = d, M = -m, both f16 values;
// m0 = m1 = 1, codes 0..15): 20 bytes a row, the file's. NIBBLES5 (Q5_1: as Q4_1, codes 0..31):
// the low 4 bits of the codes as NIBBLES, then each row's high bits as one 32-bit word at
// kI8mHighAt + 4r, whose byte k holds the high bit of element 4u + k in bit u and of element
// 16 + 4u + k in bit 4 + u (24 bytes a row, the file's). The super-block forms keep the file's
// bytes of each row's super-block s, as 4-byte units, unit u of row r at (u * 16 + r) * 4 of the
// group's super-block s (16 times the file's super-block bytes, at group + s * that), and the
// kernels take w, S, M and m_h from them: Q2K (Q2_K, 84 bytes: w = sc * q, S = d, M = dmin, m_h
// the mins), Q3K (Q3_K: its first 108 bytes as 27 units, then its f16 d of row r at kI8mQ3kD +
// 2r), Q5K (Q5_K, 176 bytes: S = d * sc_j and M = dmin * m_j made in registers, exact f32
// products), IQ4K (IQ4_XS, 136 bytes: w = kIq4Values[q], S = d * (ls - 32) likewise).
enum class I8mForm : uint8_t { NIBBLES5, NIBBLES, Q2K, Q3K, Q5K, IQ4K };
constexpr int64_t kI8mScaleAt = 0;
constexpr int64_t kI8mMinAt = 32;
constexpr int64_t kI8mHighAt = 320;
constexpr int64_t kI8mQ2kGroupSuper = 16 * 84;    // Q2K: bytes of one super-block of a group
constexpr int64_t kI8mQ3kGroupSuper = 16 * 110;   // Q3K: the same
constexpr int64_t kI8mQ3kD = 27 * 64;             // Q3K: the 16 rows' d in a super-block
constexpr int64_t kI8mQ5kGroupSuper = 16 * 176;   // Q5K: the same
constexpr int64_t kI8mIq4kGroupSuper = 16 * 136;  // IQ4K: the same
constexpr bool i8m_has_min(I8mForm f) { return f != I8mForm::IQ4K && f != I8mForm::Q3K; }
// The forms kept per super-block (the file's bytes over a group), and the per-block ones.
constexpr bool i8m_super_form(I8mForm f) { return f != I8mForm::NIBBLES && f != I8mForm::NIBBLES5; }
// Per-block forms only.
constexpr int64_t i8m_group_block(I8mForm f) { return f == I8mForm::NIBBLES5 ? 384 : 320; }
constexpr int64_t i8m_codes_at(I8mForm) { return 64; }
inline I8mForm i8m_form(GgmlType t) {
  return t == GgmlType::Q4_1     ? I8mForm::NIBBLES
         : t == GgmlType::IQ4_XS ? I8mForm::IQ4K
         : t == GgmlType::Q2_K   ? I8mForm::Q2K
         : t == GgmlType::Q3_K   ? I8mForm::Q3K
         : t == GgmlType::Q5_K   ? I8mForm::Q5K
                                 : I8mForm::NIBBLES5;
}
inline size_t i8m_row_bytes(GgmlType t, int64_t n_in) {
  const I8mForm f = i8m_form(t);
  if (f == I8mForm::Q2K) return static_cast<size_t>(n_in / 256 * 84);
  if (f == I8mForm::Q3K) return static_cast<size_t>(n_in / 256 * 110);
  if (f == I8mForm::Q5K) return static_cast<size_t>(n_in / 256 * 176);
  if (f == I8mForm::IQ4K) return static_cast<size_t>(n_in / 256 * 136);
  return static_cast<size_t>(n_in / 32 * i8m_group_block(f) / 16);
}
bool i8m_type(GgmlType t);
// dot_q8_rows / dot_q8_panels for I8M weights (src at the start of a group, row_bytes =
// i8m_row_bytes(t, n_in)); the activations with one plane and their half sums.
void dot_i8m_rows(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                  const int8_t* q, const float* dx, const int32_t* sx, int64_t n_tok, float* out,
                  int64_t out_stride);
void dot_i8m_panels(GgmlType t, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                    const int8_t* pq, const float* pdx, const int32_t* psx, int64_t n_tok,
                    float* out, int64_t out_stride);

// True where dot_q8_panels / dot_q8_rows run the 8-bit multiply-add kernels (VNNI).
bool q8_panels_fast();

// Up to how many tokens matmul() gives type-t weights (GROUPS16 or not) the row layout and
// dot_q8_rows rather than panels (and how long a chunk's tail past its whole panels may be to
// take the row layout too): in GROUPS16 with VNNI a per-type count from 8 (Q3_K, Q5_K) to 64
// (Q8_0, Q4_0, Q4_K), up to which the decode kernels (each weight load dotted with up to 4
// tokens) measured faster than the panels; 2 otherwise. Either choice gives the same bits.
int64_t q8_rows_max(GgmlType t, bool groups);

// Row layout: q [2][n_in] (q1 plane, then q2; with planes == 1 the q2 plane is not written),
// dx and sx [n_in / 32]. Target-independent bits: the AVX-512 version equals
// quantize_row_q8_reference (the scalar definition) bitwise for NaN-free input.
void quantize_row_q8(const float* x, int64_t n_in, int planes, int8_t* q, float* dx, int32_t* sx);
void quantize_row_q8_reference(const float* x, int64_t n_in, int planes, int8_t* q, float* dx,
                               int32_t* sx);

// Panel layout, one token into lane `lane` (< 16) of a panel of nb = n_in / 32 blocks:
//   pq [2][nb][8][16][4]: plane k, elements 4g..4g+3 of block b of lane j at
//      k * nb * 512 + ((b * 8 + g) * 16 + j) * 4
//   pdx, psx [nb][16]
// x == nullptr writes a zero token (padding). Same codes as quantize_row_q8.
void quantize_row_q8_panel(const float* x, int64_t n_in, int planes, int64_t lane, int8_t* pq,
                           float* pdx, int32_t* psx);

// out[t * out_stride + r] for `count` weight rows and n_tok activation rows in row layout
// (q [n_tok][2][n_in], dx and sx [n_tok][n_in / 32], q8_planes(t) planes): decode. Weights: groups
// == false, row r at src + r * row_bytes (GGUF); groups == true, the GROUPS16 layout of
// kernels/matmul.h with src at the start of a group (its padding rows readable, their outputs not
// written).
void dot_q8_rows(GgmlType t, bool groups, const uint8_t* src, size_t row_bytes, int count,
                 int64_t n_in, const int8_t* q, const float* dx, const int32_t* sx, int64_t n_tok,
                 float* out, int64_t out_stride);

// The same for n_tok tokens in consecutive panels (panel p at pq + p * nb * 1024 bytes and
// pdx, psx + p * nb * 16; lanes past n_tok zero-padded): prefill.
void dot_q8_panels(GgmlType t, bool groups, const uint8_t* src, size_t row_bytes, int count,
                   int64_t n_in, const int8_t* pq, const float* pdx, const int32_t* psx,
                   int64_t n_tok, float* out, int64_t out_stride);

// dot_q8_rows for Q8_0 (q4 false) / Q4_0 (q4 true) in GROUPS16 where AVX-512 VNNI is present
// (src/kernels/simd/matmul_q8_groups_simd.cpp; the same arguments; only dot_q8_rows calls it).
void dot_q8_group_rows(bool q4, const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                       const int8_t* q, const float* dx, const int32_t* sx, int64_t n_tok,
                       float* out, int64_t out_stride);

// dst[0, n) = F16 or BF16 row src, widened to f32.
void widen_row_f32(GgmlType t, const uint8_t* src, float* dst, int64_t n);

// out[r] = sum_i rows[r][i] * x[i] in f32, for r < count <= 4; any n (tails included).
void dot_f32_rows(const float* const rows[4], int count, const float* x, int64_t n, float* out);

// Name of the SIMD target the dispatcher picked on this CPU (for logs and benchmarks).
const char* target_name();

}  // namespace geist::simd
