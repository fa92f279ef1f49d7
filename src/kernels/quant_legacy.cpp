// The 32-element "legacy" formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0.
//
// Dequantization uses ggml's arithmetic order (q*d, q*d + m) so values are bit-identical to
// llama.cpp's. Quantization follows ggml's reference quantizers (quantize_row_*_ref), the
// ones llama-quantize uses when no importance matrix is given, so the bytes we write match
// its output for the same input.
#include <cmath>
#include <cstdint>

#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

namespace geist::quant_detail {
namespace {

// C's float -> integer conversion (truncation) for values inside [lo, hi], which is all
// finite inputs ever produce; NaN and out-of-range values are clamped instead of being UB.
inline int trunc_clamped(float v, int lo, int hi) {
  if (!(v > static_cast<float>(lo))) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}

// The signed value of largest magnitude (first one wins ties), as the symmetric formats
// pick their scale from it.
inline float signed_absmax(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

inline void min_max(const float* x, int n, float* mn, float* mx) {
  *mn = x[0];
  *mx = x[0];
  for (int j = 1; j < n; ++j) {
    if (x[j] < *mn) *mn = x[j];
    if (x[j] > *mx) *mx = x[j];
  }
}

// 5th bits of element j (j < 16) and j + 16.
inline int q5_high(uint32_t qh, int j) { return static_cast<int>((qh >> j) & 1u) << 4; }

}  // namespace

void dequantize_q4_0(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, src += kQ4_0Bytes, dst += kQK) {
    const float d = fp16_to_fp32(load_u16(src));
    const uint8_t* qs = src + 2;
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = ((qs[j] & 0xF) - 8) * d;
      dst[j + kQK / 2] = ((qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_1(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, src += kQ4_1Bytes, dst += kQK) {
    const float d = fp16_to_fp32(load_u16(src));
    const float m = fp16_to_fp32(load_u16(src + 2));
    const uint8_t* qs = src + 4;
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = (qs[j] & 0xF) * d + m;
      dst[j + kQK / 2] = (qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_q5_0(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, src += kQ5_0Bytes, dst += kQK) {
    const float d = fp16_to_fp32(load_u16(src));
    const uint32_t qh = load_u32(src + 2);
    const uint8_t* qs = src + 6;
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = (((qs[j] & 0xF) | q5_high(qh, j)) - 16) * d;
      dst[j + kQK / 2] = (((qs[j] >> 4) | q5_high(qh, j + 16)) - 16) * d;
    }
  }
}

void dequantize_q5_1(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, src += kQ5_1Bytes, dst += kQK) {
    const float d = fp16_to_fp32(load_u16(src));
    const float m = fp16_to_fp32(load_u16(src + 2));
    const uint32_t qh = load_u32(src + 4);
    const uint8_t* qs = src + 8;
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = ((qs[j] & 0xF) | q5_high(qh, j)) * d + m;
      dst[j + kQK / 2] = ((qs[j] >> 4) | q5_high(qh, j + 16)) * d + m;
    }
  }
}

void dequantize_q8_0(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, src += kQ8_0Bytes, dst += kQK) {
    const float d = fp16_to_fp32(load_u16(src));
    const int8_t* qs = reinterpret_cast<const int8_t*>(src + 2);
    for (int j = 0; j < kQK; ++j) dst[j] = qs[j] * d;
  }
}

// Dots factor the block scale (and offset) out of the inner sum: for the offset formats
// sum(w*x) = d * sum(q*x) + m * sum(x).

float dot_q4_0(const uint8_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK; ++b, w += kQ4_0Bytes, x += kQK) {
    const uint8_t* qs = w + 2;
    float s = 0.0f;
    for (int j = 0; j < kQK / 2; ++j) {
      s += static_cast<float>((qs[j] & 0xF) - 8) * x[j];
      s += static_cast<float>((qs[j] >> 4) - 8) * x[j + kQK / 2];
    }
    sum += fp16_to_fp32(load_u16(w)) * s;
  }
  return sum;
}

float dot_q4_1(const uint8_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK; ++b, w += kQ4_1Bytes, x += kQK) {
    const uint8_t* qs = w + 4;
    float sq = 0.0f;
    float sx = 0.0f;
    for (int j = 0; j < kQK / 2; ++j) {
      sq += static_cast<float>(qs[j] & 0xF) * x[j] + static_cast<float>(qs[j] >> 4) * x[j + 16];
      sx += x[j] + x[j + kQK / 2];
    }
    sum += fp16_to_fp32(load_u16(w)) * sq + fp16_to_fp32(load_u16(w + 2)) * sx;
  }
  return sum;
}

float dot_q5_0(const uint8_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK; ++b, w += kQ5_0Bytes, x += kQK) {
    const uint32_t qh = load_u32(w + 2);
    const uint8_t* qs = w + 6;
    float s = 0.0f;
    for (int j = 0; j < kQK / 2; ++j) {
      s += static_cast<float>(((qs[j] & 0xF) | q5_high(qh, j)) - 16) * x[j];
      s += static_cast<float>(((qs[j] >> 4) | q5_high(qh, j + 16)) - 16) * x[j + kQK / 2];
    }
    sum += fp16_to_fp32(load_u16(w)) * s;
  }
  return sum;
}

float dot_q5_1(const uint8_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK; ++b, w += kQ5_1Bytes, x += kQK) {
    const uint32_t qh = load_u32(w + 4);
    const uint8_t* qs = w + 8;
    float sq = 0.0f;
    float sx = 0.0f;
    for (int j = 0; j < kQK / 2; ++j) {
      sq += static_cast<float>((qs[j] & 0xF) | q5_high(qh, j)) * x[j];
      sq += static_cast<float>((qs[j] >> 4) | q5_high(qh, j + 16)) * x[j + kQK / 2];
      sx += x[j] + x[j + kQK / 2];
    }
    sum += fp16_to_fp32(load_u16(w)) * sq + fp16_to_fp32(load_u16(w + 2)) * sx;
  }
  return sum;
}

float dot_q8_0(const uint8_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK; ++b, w += kQ8_0Bytes, x += kQK) {
    const int8_t* qs = reinterpret_cast<const int8_t*>(w + 2);
    float s = 0.0f;
    for (int j = 0; j < kQK; ++j) s += static_cast<float>(qs[j]) * x[j];
    sum += fp16_to_fp32(load_u16(w)) * s;
  }
  return sum;
}

// Symmetric formats: the value of largest magnitude maps exactly to the most negative code
// (d = max / -8 for 4 bits), which spends the extra negative code on it; the opposite end may
// then clamp at +7 (an error of up to one step).
void quantize_q4_0(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, src += kQK, dst += kQ4_0Bytes) {
    const float d = signed_absmax(src, kQK) / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(dst, fp32_to_fp16(d));
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = trunc_clamped(src[j] * id + 8.5f, 0, 15);
      const int hi = trunc_clamped(src[j + kQK / 2] * id + 8.5f, 0, 15);
      dst[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_q5_0(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, src += kQK, dst += kQ5_0Bytes) {
    const float d = signed_absmax(src, kQK) / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(dst, fp32_to_fp16(d));
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = trunc_clamped(src[j] * id + 16.5f, 0, 31);
      const int hi = trunc_clamped(src[j + kQK / 2] * id + 16.5f, 0, 31);
      dst[6 + j] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
      qh |= static_cast<uint32_t>(lo >> 4) << j;
      qh |= static_cast<uint32_t>(hi >> 4) << (j + kQK / 2);
    }
    store_u32(dst + 2, qh);
  }
}

// Offset formats: d spans [min, max] in 2^bits - 1 steps and m = min, rounding half up.
void quantize_q4_1(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, src += kQK, dst += kQ4_1Bytes) {
    float mn, mx;
    min_max(src, kQK, &mn, &mx);
    const float d = (mx - mn) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(dst, fp32_to_fp16(d));
    store_u16(dst + 2, fp32_to_fp16(mn));
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = trunc_clamped((src[j] - mn) * id + 0.5f, 0, 15);
      const int hi = trunc_clamped((src[j + kQK / 2] - mn) * id + 0.5f, 0, 15);
      dst[4 + j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_q5_1(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, src += kQK, dst += kQ5_1Bytes) {
    float mn, mx;
    min_max(src, kQK, &mn, &mx);
    const float d = (mx - mn) / 31;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(dst, fp32_to_fp16(d));
    store_u16(dst + 2, fp32_to_fp16(mn));
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = trunc_clamped((src[j] - mn) * id + 0.5f, 0, 31);
      const int hi = trunc_clamped((src[j + kQK / 2] - mn) * id + 0.5f, 0, 31);
      dst[8 + j] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
      qh |= static_cast<uint32_t>(lo >> 4) << j;
      qh |= static_cast<uint32_t>(hi >> 4) << (j + kQK / 2);
    }
    store_u32(dst + 4, qh);
  }
}

void quantize_q8_0(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, src += kQK, dst += kQ8_0Bytes) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(src[j]));
    const float d = amax / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(dst, fp32_to_fp16(d));
    for (int j = 0; j < kQK; ++j) {
      // roundf rounds halves away from zero; it is what ggml uses.
      const float r = std::round(src[j] * id);
      dst[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(trunc_clamped(r, -128, 127)));
    }
  }
}

}  // namespace geist::quant_detail
