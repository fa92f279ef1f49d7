// The 2- and 3-bit K-quant super-block formats Q2_K and Q3_K (256 elements, 16-element
// sub-blocks): dequantization and dot products. Dequantization uses ggml's arithmetic order
// (Q2_K: d*sc, dmin*m, then dl*q - ml; Q3_K: d*(s - 32), then dl*code) so values are
// bit-identical to llama.cpp's. Their quantizers are in quant_k_ref.cpp.
#include <cstdint>

#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

namespace geist::quant_detail {
namespace {

// The 2-bit code of element e (0..255) of a Q2_K / Q3_K super-block's qs.
inline int k_low2(const uint8_t* qs, int e) {
  const int h = e / 128, j = e % 128 / 32, l = e % 32;
  return (qs[32 * h + l] >> (2 * j)) & 3;
}

// Q3_K's signed 3-bit code of element e: the low 2 bits, minus 4 when its hmask bit is clear.
inline int q3_code(const uint8_t* block, int e) {
  const int high = (block[e % 32] >> (e / 32)) & 1;
  return k_low2(block + 32, e) - (high ? 0 : 4);
}

}  // namespace

void dequantize_q2_k(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQ2_KBytes, dst += kQK_K) {
    const float d = fp16_to_fp32(load_u16(src + 80));
    const float dmin = fp16_to_fp32(load_u16(src + 82));
    for (int s = 0; s < 16; ++s) {
      const float dl = d * static_cast<float>(src[s] & 0xF);
      const float ml = dmin * static_cast<float>(src[s] >> 4);
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * s + l;
        dst[e] = dl * static_cast<float>(k_low2(src + 16, e)) - ml;
      }
    }
  }
}

void dequantize_q3_k(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQ3_KBytes, dst += kQK_K) {
    const float d = fp16_to_fp32(load_u16(src + 108));
    for (int s = 0; s < 16; ++s) {
      const float dl = d * static_cast<float>(q3_k_scale(src + 96, s) - 32);
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * s + l;
        dst[e] = dl * static_cast<float>(q3_code(src, e));
      }
    }
  }
}

// Dots: per 16-element sub-block, sum(w*x) = dl * sum(q*x) - ml * sum(x).

float dot_q2_k(const uint8_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b, w += kQ2_KBytes, x += kQK_K) {
    const float d = fp16_to_fp32(load_u16(w + 80));
    const float dmin = fp16_to_fp32(load_u16(w + 82));
    for (int s = 0; s < 16; ++s) {
      float sq = 0.0f, sx = 0.0f;
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * s + l;
        sq += static_cast<float>(k_low2(w + 16, e)) * x[e];
        sx += x[e];
      }
      sum += d * static_cast<float>(w[s] & 0xF) * sq - dmin * static_cast<float>(w[s] >> 4) * sx;
    }
  }
  return sum;
}

float dot_q3_k(const uint8_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b, w += kQ3_KBytes, x += kQK_K) {
    const float d = fp16_to_fp32(load_u16(w + 108));
    for (int s = 0; s < 16; ++s) {
      float sq = 0.0f;
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * s + l;
        sq += static_cast<float>(q3_code(w, e)) * x[e];
      }
      sum += d * static_cast<float>(q3_k_scale(w + 96, s) - 32) * sq;
    }
  }
  return sum;
}

}  // namespace geist::quant_detail
