// IEEE half / bfloat16 <-> float conversions done on the bits, so results do not depend on
// F16C or the compiler's _Float16 support, and the F32/F16/BF16 row functions.
#include <bit>
#include <cstdint>
#include <cstring>

#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

namespace geist {

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {  // inf / NaN: payload moves up unchanged, so NaNs stay NaN
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal half: every one is a normal float; shift the leading 1 into the hidden bit.
    uint32_t e = 127 - 15 + 1;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t fp32_to_fp16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) {
    // NaN: keep the top payload bits and force the quiet bit so it cannot become inf.
    return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  }
  // 65520 is the midpoint between the largest half (65504, odd mantissa) and 2^16, so it
  // and everything above round to inf under nearest-even.
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (a < 0x38800000u) {
    // Below 2^-14 the half is subnormal: its integer field is round(|f| / 2^-24).
    const uint32_t e = a >> 23;
    const uint32_t shift = 126 - e;  // |f| / 2^-24 == m >> shift, m with its hidden bit
    if (shift > 24) return sign;     // < 2^-25 (or a float subnormal): rounds to zero
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;  // may carry into the first normal
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = (((a >> 23) - (127 - 15)) << 10) | ((a >> 13) & 0x3ffu);
  const uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // a carry bumps the exponent
  return static_cast<uint16_t>(sign | r);
}

float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t fp32_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    // Truncating a NaN could clear all remaining payload bits (= inf); force the quiet bit.
    return static_cast<uint16_t>((u >> 16) | 0x40u);
  }
  // Adding 0x7fff plus the lowest kept bit rounds half to even; overflow lands on inf.
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

namespace quant_detail {

void dequantize_f32(const uint8_t* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void dequantize_f16(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(load_u16(src + 2 * i));
}

void dequantize_bf16(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(load_u16(src + 2 * i));
}

float dot_f32(const uint8_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, w + 4 * i, sizeof(v));
    sum += v * x[i];
  }
  return sum;
}

float dot_f16(const uint8_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += fp16_to_fp32(load_u16(w + 2 * i)) * x[i];
  return sum;
}

float dot_bf16(const uint8_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += bf16_to_fp32(load_u16(w + 2 * i)) * x[i];
  return sum;
}

void quantize_f32(const float* src, uint8_t* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void quantize_f16(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) store_u16(dst + 2 * i, fp32_to_fp16(src[i]));
}

void quantize_bf16(const float* src, uint8_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) store_u16(dst + 2 * i, fp32_to_bf16(src[i]));
}

}  // namespace quant_detail
}  // namespace geist
