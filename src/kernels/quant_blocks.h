// Private to the quant*.cpp files: ggml's block layouts as byte offsets, and the per-type
// row functions that quant.cpp dispatches to. Blocks are read through byte pointers (never
// cast to structs) because a row inside a GGUF tensor is only guaranteed byte alignment.
#pragma once

#include <cstdint>
#include <cstring>

namespace geist::quant_detail {

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));  // little-endian host, like the GGUF file
  return v;
}
inline void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, sizeof(v)); }
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void store_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, sizeof(v)); }

// Legacy 32-element blocks. Offsets in bytes.
//   Q4_0 (18): d f16 @0, qs[16] @2; element j<16 = low nibble of qs[j], j>=16 = high nibble
//              of qs[j-16]; value = (q - 8) * d.
//   Q4_1 (20): d f16 @0, m f16 @2, qs[16] @4; value = q * d + m.
//   Q5_0 (22): d f16 @0, qh u32 @2 (bit j = 5th bit of element j), qs[16] @6;
//              value = (q - 16) * d.
//   Q5_1 (24): d f16 @0, m f16 @2, qh u32 @4, qs[16] @8; value = q * d + m.
//   Q8_0 (34): d f16 @0, qs int8[32] @2; value = q * d.
constexpr int kQK = 32;
constexpr int kQ4_0Bytes = 18;
constexpr int kQ4_1Bytes = 20;
constexpr int kQ5_0Bytes = 22;
constexpr int kQ5_1Bytes = 24;
constexpr int kQ8_0Bytes = 34;

// K-quant 256-element super-blocks.
//   Q4_K (144): d f16 @0, dmin f16 @2, scales[12] @4 (8 packed 6-bit scale/min pairs),
//               qs[128] @16; for chunk c of 64 elements, qs[32c + l] holds element 64c+l in
//               its low nibble and element 64c+32+l in its high nibble.
//               value = d*sc[s] * q - dmin*m[s], s = element / 32.
//   Q5_K (176): d @0, dmin @2, scales[12] @4, qh[32] @16, qs[128] @48; the 5th bit of
//               element 64c+l is bit 2c of qh[l], of element 64c+32+l bit 2c+1 of qh[l].
//   Q6_K (210): ql[128] @0, qh[64] @128, scales int8[16] @192, d f16 @208; for half h of
//               128 elements and l < 32, ql[64h+l] low/high nibble = elements 128h+l /
//               128h+l+64, ql[64h+l+32] low/high = 128h+l+32 / 128h+l+96, and qh[32h+l]
//               bits 0-1, 2-3, 4-5, 6-7 are the top two bits of elements 128h+l, +32, +64,
//               +96. value = d * scales[element / 16] * (q - 32).
//   Q2_K (84):  scales[16] @0 (per 16 elements: low nibble scale, high nibble min), qs[64] @16,
//               d f16 @80, dmin f16 @82; element e = 128h + 32j + l (l < 32) has the 2-bit
//               code (qs[32h + l] >> 2j) & 3. value = d*(sc & 15) * q - dmin*(sc >> 4).
//   Q3_K (110): hmask[32] @0, qs[64] @32, scales[12] @96, d f16 @108; element e as for Q2_K
//               takes its low 2 bits from qs[32h + l] >> 2j and its high bit from bit e / 32
//               of hmask[e % 32] (code = low - 4 when that bit is clear, low otherwise);
//               value = d * (s - 32) * code with s the 6-bit scale of e / 16 (q3_k_scale).
constexpr int kQK_K = 256;
constexpr int kQ2_KBytes = 84;
constexpr int kQ3_KBytes = 110;
constexpr int kQ4_KBytes = 144;
constexpr int kQ5_KBytes = 176;
constexpr int kQ6_KBytes = 210;

// Non-linear 4-bit formats: 4-bit indices into kIq4Values.
//   IQ4_NL (18):  d f16 @0, qs[16] @2, nibbles as Q4_0; value = d * kIq4Values[q].
//   IQ4_XS (136): d f16 @0, scales_h u16 @2, scales_l[4] @4, qs[128] @8; 32-block j has the
//                 6-bit scale s = (scales_l[j / 2] >> 4 (j % 2)) & 15 | ((scales_h >> 2j) & 3)
//                 << 4, its 16 bytes at qs + 16j laid out as IQ4_NL's; value =
//                 d * (s - 32) * kIq4Values[q].
constexpr int kIq4NlBytes = 18;
constexpr int kIq4XsBytes = 136;
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

// Q3_K's 6-bit scale (0..63, stored with +32) of 16-element sub-block j (0..15): low 4 bits
// in the low (j < 8) or high (j >= 8) nibble of byte j % 8, top 2 bits at bit 2 (j / 4) of byte
// 8 + j % 4.
inline int q3_k_scale(const uint8_t* scales, int j) {
  const int lo = j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4;
  return lo | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}

// IQ4_XS's 6-bit scale (0..63, stored with +32) of 32-block j (0..7) of a super-block.
inline int iq4_xs_scale(const uint8_t* block, int j) {
  const int lo = (block[4 + j / 2] >> (4 * (j % 2))) & 0xF;
  return lo | (((load_u16(block + 2) >> (2 * j)) & 3) << 4);
}

// The 6-bit (scale, min) pair of sub-block j (0..7) from Q4_K/Q5_K's 12 packed bytes:
// pairs 0-3 sit in the low 6 bits of bytes 0-3 / 4-7; pairs 4-7 keep their low 4 bits in
// bytes 8-11 and their top 2 bits in the spare top bits of bytes 0-3 / 4-7.
inline void k_scale_min(const uint8_t* scales, int j, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// Row functions: n is a multiple of the block size; dst/src/w hold n / block_size blocks.
void dequantize_f32(const uint8_t* src, float* dst, int64_t n);
void dequantize_f16(const uint8_t* src, float* dst, int64_t n);
void dequantize_bf16(const uint8_t* src, float* dst, int64_t n);
float dot_f32(const uint8_t* w, const float* x, int64_t n);
float dot_f16(const uint8_t* w, const float* x, int64_t n);
float dot_bf16(const uint8_t* w, const float* x, int64_t n);
void quantize_f32(const float* src, uint8_t* dst, int64_t n);
void quantize_f16(const float* src, uint8_t* dst, int64_t n);
void quantize_bf16(const float* src, uint8_t* dst, int64_t n);

void dequantize_q4_0(const uint8_t* src, float* dst, int64_t n);
void dequantize_q4_1(const uint8_t* src, float* dst, int64_t n);
void dequantize_q5_0(const uint8_t* src, float* dst, int64_t n);
void dequantize_q5_1(const uint8_t* src, float* dst, int64_t n);
void dequantize_q8_0(const uint8_t* src, float* dst, int64_t n);
float dot_q4_0(const uint8_t* w, const float* x, int64_t n);
float dot_q4_1(const uint8_t* w, const float* x, int64_t n);
float dot_q5_0(const uint8_t* w, const float* x, int64_t n);
float dot_q5_1(const uint8_t* w, const float* x, int64_t n);
float dot_q8_0(const uint8_t* w, const float* x, int64_t n);
void quantize_q4_0(const float* src, uint8_t* dst, int64_t n);
void quantize_q4_1(const float* src, uint8_t* dst, int64_t n);
void quantize_q5_0(const float* src, uint8_t* dst, int64_t n);
void quantize_q5_1(const float* src, uint8_t* dst, int64_t n);
void quantize_q8_0(const float* src, uint8_t* dst, int64_t n);

void dequantize_q4_k(const uint8_t* src, float* dst, int64_t n);
void dequantize_q5_k(const uint8_t* src, float* dst, int64_t n);
void dequantize_q6_k(const uint8_t* src, float* dst, int64_t n);
float dot_q4_k(const uint8_t* w, const float* x, int64_t n);
float dot_q5_k(const uint8_t* w, const float* x, int64_t n);
float dot_q6_k(const uint8_t* w, const float* x, int64_t n);
void quantize_q4_k(const float* src, uint8_t* dst, int64_t n);
void quantize_q6_k(const float* src, uint8_t* dst, int64_t n);

void dequantize_q2_k(const uint8_t* src, float* dst, int64_t n);
void dequantize_q3_k(const uint8_t* src, float* dst, int64_t n);
float dot_q2_k(const uint8_t* w, const float* x, int64_t n);
float dot_q3_k(const uint8_t* w, const float* x, int64_t n);
// ggml's reference quantizers (no importance matrix), quant_k_ref.cpp.
void quantize_q2_k(const float* src, uint8_t* dst, int64_t n);
void quantize_q3_k(const float* src, uint8_t* dst, int64_t n);
void quantize_q5_k(const float* src, uint8_t* dst, int64_t n);

void dequantize_iq4_nl(const uint8_t* src, float* dst, int64_t n);
void dequantize_iq4_xs(const uint8_t* src, float* dst, int64_t n);
float dot_iq4_nl(const uint8_t* w, const float* x, int64_t n);
float dot_iq4_xs(const uint8_t* w, const float* x, int64_t n);
void quantize_iq4_nl(const float* src, uint8_t* dst, int64_t n);
void quantize_iq4_xs(const float* src, uint8_t* dst, int64_t n);

// ggml's nearest_int: round to nearest, halves to even (|v| < 2^22), through the f32 adder.
inline int nearest_int(float v) {
  const float t = v + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &t, sizeof(i));
  return (i & 0x007fffff) - 0x00400000;
}

}  // namespace geist::quant_detail
