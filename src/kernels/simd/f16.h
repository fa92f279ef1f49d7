// Branch-free IEEE half -> float for the kernels' hot loops (block scales): bitwise equal to
// fp16_to_fp32 in quant.h for all 65536 inputs (tests/kernels/test_simd_matmul.cpp checks),
// without its out-of-line call and branches.
#pragma once

#include <bit>
#include <cstdint>

namespace geist::simd {

inline float f16_to_f32(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;  // exponent and mantissa, sign shifted out
  // Normal, inf and NaN: move exponent+mantissa into place, rebias by 2^-112 (the 0xE0 added to
  // the exponent turns half's all-ones exponent into float's all-ones one).
  const float normalized = std::bit_cast<float>((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  // Subnormal: the mantissa as the low bits of a float in [0.5, 1), minus 0.5, is exact.
  const float denormalized = std::bit_cast<float>((two_w >> 17) | (126u << 23)) - 0.5f;
  const uint32_t bits = two_w < (1u << 27) ? std::bit_cast<uint32_t>(denormalized)
                                           : std::bit_cast<uint32_t>(normalized);
  return std::bit_cast<float>(sign | bits);
}

}  // namespace geist::simd
