// Shared by the AVX-512 VNNI kernels of the packed I8M forms (matmul_i8m_super_simd.cpp,
// matmul_i8m_packed_simd.cpp): the target attribute and small helpers. x86-64 only; private to
// src/kernels/simd.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

#define GEIST_I8MP_ATTR \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512vnni,avx2,fma,f16c")))

namespace geist::simd::i8m_packed {

constexpr int64_t kGroup = 16;  // rows per group

// h0 | h1 << 16 as int16 halves (|h0|, |h1| < 2^15).
inline int32_t pack_halves(int32_t h0, int32_t h1) {
  return static_cast<int32_t>((static_cast<uint32_t>(h0) & 0xFFFFu) |
                              (static_cast<uint32_t>(h1) << 16));
}

// vpshufb control (per 128-bit lane of four 32-bit lanes): bytes lo and hi of each 32-bit lane
// into the low bytes of its two 16-bit halves, the other bytes zero.
GEIST_I8MP_ATTR inline __m512i byte_control(int lo, int hi) {
  alignas(64) uint8_t c[64];
  for (int l = 0; l < 16; ++l) {
    const int base = 4 * (l % 4);
    c[4 * l] = static_cast<uint8_t>(base + lo);
    c[4 * l + 1] = 0x80;
    c[4 * l + 2] = static_cast<uint8_t>(base + hi);
    c[4 * l + 3] = 0x80;
  }
  return _mm512_load_si512(c);
}

}  // namespace geist::simd::i8m_packed
#endif  // __x86_64__
