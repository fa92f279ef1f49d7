// The non-linear 4-bit formats IQ4_NL (32-element blocks) and IQ4_XS (256-element super-blocks
// with 6-bit 32-block scales): 4-bit indices into ggml's 16-value table kIq4Values.
//
// Dequantization uses ggml's arithmetic order (d * value; for IQ4_XS (d * (s - 32)) * value) so
// values are bit-identical to llama.cpp's. Quantization follows what llama-quantize runs without
// an importance matrix (ggml's quantize_iq4_nl / quantize_iq4_xs: per 32-block a weighted
// least-squares scale over 15 trial steps, weights x^2), so round trips through both tools agree.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

namespace geist::quant_detail {
namespace {

constexpr int kIq4Tries = 7;  // llama-quantize's ntry: trial steps -7..7 around the extreme

// Index of the table value nearest to v (the lower one on a tie), as ggml's best_index_int8.
int nearest_iq4_index(float v) {
  if (v <= kIq4Values[0]) return 0;
  if (v >= kIq4Values[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < kIq4Values[mid]) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return v - kIq4Values[hi - 1] < kIq4Values[hi] - v ? hi - 1 : hi;
}

// 16 nibble bytes of a 32-element block (element j < 16 low nibble of qs[j], 16 + j high).
inline void iq4_values(const uint8_t* qs, int8_t v[32]) {
  for (int j = 0; j < 16; ++j) {
    v[j] = kIq4Values[qs[j] & 0xF];
    v[j + 16] = kIq4Values[qs[j] >> 4];
  }
}

// The scale of one 32-block x (nullptr-free, weights x^2): a first least-squares fit on the codes
// of d = max / kIq4Values[0], then trials id = (t + kIq4Values[0]) / max for t in [-7, 7]; keeps
// the best weighted fit. 0 for an all-(near-)zero block. L receives the first fit's indices.
float fit_iq4_block(const float* x, uint8_t* L) {
  float weight[32];
  for (int j = 0; j < 32; ++j) weight[j] = x[j] * x[j];
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax < 1e-15f) {
    std::memset(L, 0, 32);
    return 0.0f;
  }
  float d = -max / kIq4Values[0];
  float id = 1 / d;
  float sumqx = 0.0f, sumq2 = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const int l = nearest_iq4_index(id * x[j]);
    L[j] = static_cast<uint8_t>(l);
    const float q = kIq4Values[l];
    sumqx += weight[j] * q * x[j];
    sumq2 += weight[j] * q * q;
  }
  d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
  float best = d * sumqx;
  for (int t = -kIq4Tries; t <= kIq4Tries; ++t) {
    id = (static_cast<float>(t) + kIq4Values[0]) / max;
    sumqx = sumq2 = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float q = kIq4Values[nearest_iq4_index(id * x[j])];
      sumqx += weight[j] * q * x[j];
      sumq2 += weight[j] * q * q;
    }
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

inline void pack_nibbles(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(L[j] | (L[16 + j] << 4));
}

}  // namespace

void dequantize_iq4_nl(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, src += kIq4NlBytes, dst += kQK) {
    const float d = fp16_to_fp32(load_u16(src));
    int8_t v[32];
    iq4_values(src + 2, v);
    for (int j = 0; j < 32; ++j) dst[j] = d * v[j];
  }
}

void dequantize_iq4_xs(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kIq4XsBytes) {
    const float d = fp16_to_fp32(load_u16(src));
    for (int j = 0; j < 8; ++j, dst += 32) {
      const float dl = d * static_cast<float>(iq4_xs_scale(src, j) - 32);
      int8_t v[32];
      iq4_values(src + 8 + 16 * j, v);
      for (int l = 0; l < 32; ++l) dst[l] = dl * v[l];
    }
  }
}

float dot_iq4_nl(const uint8_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK; ++b, w += kIq4NlBytes, x += kQK) {
    int8_t v[32];
    iq4_values(w + 2, v);
    float s = 0.0f;
    for (int j = 0; j < 32; ++j) s += static_cast<float>(v[j]) * x[j];
    sum += fp16_to_fp32(load_u16(w)) * s;
  }
  return sum;
}

float dot_iq4_xs(const uint8_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b, w += kIq4XsBytes) {
    const float d = fp16_to_fp32(load_u16(w));
    for (int j = 0; j < 8; ++j, x += 32) {
      int8_t v[32];
      iq4_values(w + 8 + 16 * j, v);
      float s = 0.0f;
      for (int l = 0; l < 32; ++l) s += static_cast<float>(v[l]) * x[l];
      sum += d * static_cast<float>(iq4_xs_scale(w, j) - 32) * s;
    }
  }
  return sum;
}

// IQ4_NL: the block's fitted scale becomes d (f16); the indices are re-picked against 1 / the
// unrounded scale, as ggml does.
void quantize_iq4_nl(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, src += kQK, dst += kIq4NlBytes) {
    uint8_t L[32];
    const float d = fit_iq4_block(src, L);
    store_u16(dst, fp32_to_fp16(d));
    const float id = d != 0.0f ? 1 / d : 0.0f;
    for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(nearest_iq4_index(id * src[j]));
    pack_nibbles(L, dst + 2);
  }
}

// IQ4_XS: the 8 block scales are coded in 6 bits against d = -(signed largest) / 32, and each
// block's indices re-picked against its coded scale d * l.
void quantize_iq4_xs(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K, dst += kIq4XsBytes) {
    uint8_t L[kQK_K];
    float scales[8];
    float max_scale = 0.0f, amax_scale = 0.0f;
    for (int j = 0; j < 8; ++j) {
      scales[j] = fit_iq4_block(src + 32 * j, L + 32 * j);
      if (std::fabs(scales[j]) > amax_scale) {
        amax_scale = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    const float d = -max_scale / 32;
    store_u16(dst, fp32_to_fp16(d));
    const float id = d != 0.0f ? 1 / d : 0.0f;
    uint16_t scales_h = 0;
    std::memset(dst + 4, 0, 4);
    for (int j = 0; j < 8; ++j) {
      int l = nearest_int(id * scales[j]);
      l = l < -32 ? -32 : l > 31 ? 31 : l;
      const float dl = d * static_cast<float>(l);
      const float idl = dl != 0.0f ? 1 / dl : 0.0f;
      for (int k = 0; k < 32; ++k) {
        L[32 * j + k] = static_cast<uint8_t>(nearest_iq4_index(idl * src[32 * j + k]));
      }
      l += 32;
      dst[4 + j / 2] |= static_cast<uint8_t>((l & 0xF) << (4 * (j % 2)));
      scales_h = static_cast<uint16_t>(scales_h | ((l >> 4) << (2 * j)));
      pack_nibbles(L + 32 * j, dst + 8 + 16 * j);
    }
    store_u16(dst + 2, scales_h);
  }
}

}  // namespace geist::quant_detail
