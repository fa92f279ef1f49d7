// AVX-512 VNNI decode kernels of the I8M super-block forms (matmul_i8m_packed.h, matmul_simd.h
// "I8M"): Q2K, Q3K, Q5K and IQ4K, the 16 rows of a group in the lanes (one 64-byte load is a
// 4-byte unit of the file's bytes of 16 rows), the codes and scales decoded in registers.
//
// Every output is the I8M formula of matmul_simd.h, the same integers and the same float
// operations in the same order as the portable loops (matmul_i8m_simd.cpp), so the bits agree:
// isum = dot(w, q1) exact in int32 (Q2K: w = sc * q; Q3K: (s - 32) * code; Q5K: the 5-bit code;
// IQ4K: kIq4Values[q]), ms = m0 * hs0 + m1 * hs1 exact, then acc = fma(float(isum), S * dx_b,
// acc) and acc = fma(M, -(float(ms) * dx_b), acc) (not Q3K, IQ4K) per block in block order.
#include "kernels/simd/matmul_i8m_packed.h"
#include "kernels/simd/stream_prefetch.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#include "kernels/quant_blocks.h"
#include "kernels/simd/f16.h"
#include "kernels/simd/matmul_i8m_vnni.h"

#pragma GCC diagnostic push
#if !defined(__clang__)  // a GCC-only group; clang (no Highway header here to silence it) errs
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace geist::simd::i8m_packed {
namespace {

using quant_detail::load_u32;

constexpr int64_t kQ2kDUnit = 80 / 4;  // the unit of d | dmin << 16

// Q2K decode: T tokens (rows layout) against the 16 rows of the group at grp. Units of 16 rows:
// 0-3 the 16 scale bytes (low nibble sc, high nibble m, one per 16 elements), 4-19 the 2-bit
// codes (32-block k = 4h + j: bits 2j of units 4 + 8h + g, elements 4g..4g+3), 20 d | dmin << 16.
// The unsigned operand is the 2-bit code; each 16-element half's dot times its scale (one
// vpmaddwd) gives the block's isum exactly.
template <int T>
GEIST_I8MP_ATTR void q2k_group_tile(const uint8_t* grp, int64_t n_in, const int8_t* q,
                                    const float* dx, __m512 acc_out[T]) {
  const int64_t nb = n_in / 32;
  const __m512i m2 = _mm512_set1_epi8(3), m4w = _mm512_set1_epi16(15);
  const __m512i lo16 = _mm512_set1_epi32(0xFFFF);
  const __m512i pair[2] = {byte_control(0, 1), byte_control(2, 3)};
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t s = 0; s < n_in / 256; ++s) {
    const uint8_t* sb = grp + s * kI8mQ2kGroupSuper;
    prefetch_stream(sb, kI8mQ2kGroupSuper);
    const __m512i dd = _mm512_loadu_si512(sb + kQ2kDUnit * 64);
    const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
    const __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
    for (int h = 0; h < 2; ++h) {
      __m512i qv[8];
      for (int g = 0; g < 8; ++g) qv[g] = _mm512_loadu_si512(sb + (4 + 8 * h + g) * 64);
      for (int j = 0; j < 4; ++j) {
        const int k = 4 * h + j;
        const int64_t b = s * 8 + k;
        // The block's two scale bytes (unit k / 2, bytes 2 (k % 2), + 1) as int16 pairs:
        // sc0 | sc1 << 16 and m0 | m1 << 16.
        const __m512i sh = _mm512_shuffle_epi8(_mm512_loadu_si512(sb + (k / 2) * 64), pair[k % 2]);
        const __m512i scp = _mm512_and_si512(sh, m4w);
        const __m512i mp = _mm512_srli_epi16(sh, 4);
        __m512i sum[T][2];  // [token][16-element half]: dot(q, q1), |.| < 2^15
        for (int t = 0; t < T; ++t) sum[t][0] = sum[t][1] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
          const __m512i codes =
              _mm512_and_si512(_mm512_srl_epi16(qv[g], _mm_cvtsi32_si128(2 * j)), m2);
          for (int t = 0; t < T; ++t) {
            int32_t xv;
            std::memcpy(&xv, q + t * 2 * n_in + b * 32 + 4 * g, 4);
            sum[t][g / 4] = _mm512_dpbusd_epi32(sum[t][g / 4], codes, _mm512_set1_epi32(xv));
          }
        }
        for (int t = 0; t < T; ++t) {
          // isum = sc0 * dot0 + sc1 * dot1 = dot(sc * q, q1), exact.
          const __m512i isum = _mm512_madd_epi16(
              _mm512_or_si512(_mm512_and_si512(sum[t][0], lo16), _mm512_slli_epi32(sum[t][1], 16)),
              scp);
          const __m512 dxv = _mm512_set1_ps(dx[t * nb + b]);
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, dxv), acc[t]);
          int32_t hs[2];
          std::memcpy(hs, q + t * 2 * n_in + n_in + b * 8, 8);
          const __m512 ms = _mm512_cvtepi32_ps(
              _mm512_madd_epi16(mp, _mm512_set1_epi32(pack_halves(hs[0], hs[1]))));
          acc[t] = _mm512_fnmadd_ps(dmin, _mm512_mul_ps(ms, dxv), acc[t]);
        }
      }
    }
  }
  for (int t = 0; t < T; ++t) acc_out[t] = acc[t];
}

// Q3K decode: T tokens (rows layout) against the 16 rows of the group at grp. Units of 16 rows:
// 0-7 hmask (bit k of byte l: the high bit of element l of 32-block k), 8-23 the low 2 bits of
// the codes (as Q2K's, from unit 8), 24-26 the 12 packed scale bytes; then the rows' d. The
// unsigned operand is c = code + 4 (0..7); per 16-element half, dot(code, q1) = dot(c, q1) -
// 4 * hs, times the half's scale s - 32: the block's isum exactly (one vpmaddwd: |dot| < 2^15).
template <int T>
GEIST_I8MP_ATTR void q3k_group_tile(const uint8_t* grp, int64_t n_in, const int8_t* q,
                                    const float* dx, __m512 acc_out[T]) {
  const int64_t nb = n_in / 32;
  const __m512i m2 = _mm512_set1_epi8(3), bit2 = _mm512_set1_epi8(4);
  const __m512i m4w = _mm512_set1_epi16(15), m2w = _mm512_set1_epi16(3);
  const __m512i k32 = _mm512_set1_epi16(32), lo16 = _mm512_set1_epi32(0xFFFF);
  const __m512i pair[2] = {byte_control(0, 1), byte_control(2, 3)};
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t s = 0; s < n_in / 256; ++s) {
    const uint8_t* sb = grp + s * kI8mQ3kGroupSuper;
    prefetch_stream(sb, kI8mQ3kGroupSuper);
    const __m512 d =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + kI8mQ3kD)));
    const __m512i su[3] = {_mm512_loadu_si512(sb + 24 * 64), _mm512_loadu_si512(sb + 25 * 64),
                           _mm512_loadu_si512(sb + 26 * 64)};
    __m512i hm[8];
    for (int g = 0; g < 8; ++g) hm[g] = _mm512_loadu_si512(sb + g * 64);
    for (int h = 0; h < 2; ++h) {
      __m512i qv[8];
      for (int g = 0; g < 8; ++g) qv[g] = _mm512_loadu_si512(sb + (8 + 8 * h + g) * 64);
      for (int j = 0; j < 4; ++j) {
        const int k = 4 * h + j;
        const int64_t b = s * 8 + k;
        // The 6-bit scales of halves 2k, 2k + 1 (quant_detail::q3_k_scale) as int16 pairs.
        const __m512i a = _mm512_shuffle_epi8(su[(k % 4) / 2], pair[k % 2]);
        const __m512i lo = _mm512_and_si512(k < 4 ? a : _mm512_srli_epi16(a, 4), m4w);
        const __m512i hi =
            _mm512_and_si512(_mm512_srl_epi16(_mm512_shuffle_epi8(su[2], pair[k % 2]),
                                              _mm_cvtsi32_si128(2 * (k / 2))),
                             m2w);
        const __m512i scm = _mm512_sub_epi16(_mm512_or_si512(lo, _mm512_slli_epi16(hi, 4)), k32);
        __m512i sum[T][2];
        for (int t = 0; t < T; ++t) sum[t][0] = sum[t][1] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
          const __m512i low =
              _mm512_and_si512(_mm512_srl_epi16(qv[g], _mm_cvtsi32_si128(2 * j)), m2);
          const __m512i hb = k >= 2 ? _mm512_srl_epi16(hm[g], _mm_cvtsi32_si128(k - 2))
                                    : _mm512_sll_epi16(hm[g], _mm_cvtsi32_si128(2 - k));
          const __m512i c = _mm512_or_si512(low, _mm512_and_si512(hb, bit2));
          for (int t = 0; t < T; ++t) {
            int32_t xv;
            std::memcpy(&xv, q + t * 2 * n_in + b * 32 + 4 * g, 4);
            sum[t][g / 4] = _mm512_dpbusd_epi32(sum[t][g / 4], c, _mm512_set1_epi32(xv));
          }
        }
        for (int t = 0; t < T; ++t) {
          int32_t hs[2];
          std::memcpy(hs, q + t * 2 * n_in + n_in + b * 8, 8);
          const __m512i v0 = _mm512_sub_epi32(sum[t][0], _mm512_set1_epi32(4 * hs[0]));
          const __m512i v1 = _mm512_sub_epi32(sum[t][1], _mm512_set1_epi32(4 * hs[1]));
          const __m512i isum = _mm512_madd_epi16(
              _mm512_or_si512(_mm512_and_si512(v0, lo16), _mm512_slli_epi32(v1, 16)), scm);
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                                   _mm512_mul_ps(d, _mm512_set1_ps(dx[t * nb + b])), acc[t]);
        }
      }
    }
  }
  for (int t = 0; t < T; ++t) acc_out[t] = acc[t];
}

// Q5K decode: T tokens (rows layout) against the 16 rows of the group at grp, as the Q4_K group
// kernel (matmul_kq_groups_simd.cpp) with the codes' high bits. Units of 16 rows: 0 d | dmin <<
// 16, 1-3 the 12 packed scale bytes, 4-11 qh (bit j of byte l: the high bit of element l of
// 32-block j), 12 + 8c + g the nibbles of elements 4g..4g+3 of blocks 2c (low) and 2c + 1 (high).
// S = d * sc_j and M = dmin * m_j are exact f32 products, the same values whoever makes them.
template <int T>
GEIST_I8MP_ATTR void q5k_group_tile(const uint8_t* grp, int64_t n_in, const int8_t* q,
                                    const float* dx, const int32_t* sx, __m512 acc_out[T]) {
  const int64_t nb = n_in / 32;
  const __m512i nib = _mm512_set1_epi8(15), b4 = _mm512_set1_epi8(16);
  const __m512i m6 = _mm512_set1_epi32(63), m4 = _mm512_set1_epi32(15), m3 = _mm512_set1_epi32(3);
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t s = 0; s < n_in / 256; ++s) {
    const uint8_t* sb = grp + s * kI8mQ5kGroupSuper;
    prefetch_stream(sb, kI8mQ5kGroupSuper);
    const __m512i w0 = _mm512_loadu_si512(sb), w1 = _mm512_loadu_si512(sb + 64);
    const __m512i w2 = _mm512_loadu_si512(sb + 128), w3 = _mm512_loadu_si512(sb + 192);
    const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(w0));
    const __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(w0, 16)));
    __m512i qh[8];
    for (int g = 0; g < 8; ++g) qh[g] = _mm512_loadu_si512(sb + (4 + g) * 64);
    for (int c = 0; c < 4; ++c) {  // blocks 2c (low nibbles) and 2c + 1 (high)
      __m512i lo[T][2], hi[T][2];  // [token][chain]; exact sums, so the split is free
      for (int t = 0; t < T; ++t)
        lo[t][0] = lo[t][1] = hi[t][0] = hi[t][1] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        const __m512i v = _mm512_loadu_si512(sb + (12 + 8 * c + g) * 64);
        // Bit 2c (2c + 1) of each qh byte to bit 4.
        const __m512i hl = 2 * c <= 4 ? _mm512_sll_epi16(qh[g], _mm_cvtsi32_si128(4 - 2 * c))
                                      : _mm512_srl_epi16(qh[g], _mm_cvtsi32_si128(2 * c - 4));
        const __m512i hh = 2 * c + 1 <= 4 ? _mm512_sll_epi16(qh[g], _mm_cvtsi32_si128(3 - 2 * c))
                                          : _mm512_srl_epi16(qh[g], _mm_cvtsi32_si128(2 * c - 3));
        const __m512i wl = _mm512_or_si512(_mm512_and_si512(v, nib), _mm512_and_si512(hl, b4));
        const __m512i wh = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), nib),
                                           _mm512_and_si512(hh, b4));
        for (int t = 0; t < T; ++t) {
          const int8_t* xs = q + t * 2 * n_in + s * 256 + 64 * c + 4 * g;
          int32_t xl, xh;
          std::memcpy(&xl, xs, 4);
          std::memcpy(&xh, xs + 32, 4);
          lo[t][g & 1] = _mm512_dpbusd_epi32(lo[t][g & 1], wl, _mm512_set1_epi32(xl));
          hi[t][g & 1] = _mm512_dpbusd_epi32(hi[t][g & 1], wh, _mm512_set1_epi32(xh));
        }
      }
      for (int half = 0; half < 2; ++half) {
        const int j = 2 * c + half;
        __m512i sc, m;  // quant_detail::k_scale_min for 16 rows
        if (j < 4) {
          sc = _mm512_and_si512(_mm512_srli_epi32(w1, 8 * j), m6);
          m = _mm512_and_si512(_mm512_srli_epi32(w2, 8 * j), m6);
        } else {
          const int sh = 8 * (j - 4);
          sc = _mm512_or_si512(
              _mm512_and_si512(_mm512_srli_epi32(w3, sh), m4),
              _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w1, sh + 6), m3), 4));
          m = _mm512_or_si512(
              _mm512_and_si512(_mm512_srli_epi32(w3, sh + 4), m4),
              _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w2, sh + 6), m3), 4));
        }
        const __m512 sv = _mm512_mul_ps(d, _mm512_cvtepi32_ps(sc));
        const __m512 mv = _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(m));
        for (int t = 0; t < T; ++t) {
          const __m512i isum = half == 0 ? _mm512_add_epi32(lo[t][0], lo[t][1])
                                         : _mm512_add_epi32(hi[t][0], hi[t][1]);
          const int64_t b = t * nb + s * 8 + j;
          const __m512 dxv = _mm512_set1_ps(dx[b]);
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(sv, dxv), acc[t]);
          // m0 = m1 = 1: ms is the block sum.
          acc[t] = _mm512_fnmadd_ps(
              mv, _mm512_mul_ps(_mm512_set1_ps(static_cast<float>(sx[b])), dxv), acc[t]);
        }
      }
    }
  }
  for (int t = 0; t < T; ++t) acc_out[t] = acc[t];
}

// IQ4K decode: T tokens (rows layout) against the 16 rows of the group at grp. Units of 16 rows:
// 0 d | scales_h << 16, 1 scales_l, 2 + 4j + u the nibble indices of elements 4u..4u+3 (low) and
// 16 + 4u.. (high) of 32-block j, looked up to kIq4Values + 128 (the unsigned operand; 128 times
// the block sum comes off the exact sum). S = d * (ls - 32), an exact f32 product; no min.
template <int T>
GEIST_I8MP_ATTR void iq4k_group_tile(const uint8_t* grp, int64_t n_in, const int8_t* q,
                                     const float* dx, const int32_t* sx, __m512 acc_out[T]) {
  const int64_t nb = n_in / 32;
  const __m512i nib = _mm512_set1_epi8(15), m4 = _mm512_set1_epi32(15), m2 = _mm512_set1_epi32(3);
  alignas(16) uint8_t tb[16];
  for (int i = 0; i < 16; ++i) tb[i] = static_cast<uint8_t>(quant_detail::kIq4Values[i] + 128);
  const __m512i table =
      _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(tb)));
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t s = 0; s < n_in / 256; ++s) {
    const uint8_t* sb = grp + s * kI8mIq4kGroupSuper;
    prefetch_stream(sb, kI8mIq4kGroupSuper);
    const __m512i w0 = _mm512_loadu_si512(sb), w1 = _mm512_loadu_si512(sb + 64);
    const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(w0));
    const __m512i sh = _mm512_srli_epi32(w0, 16);
    for (int j = 0; j < 8; ++j) {
      const int64_t b = s * 8 + j;
      __m512i sum[T][2];
      for (int t = 0; t < T; ++t) sum[t][0] = sum[t][1] = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u) {
        const __m512i v = _mm512_loadu_si512(sb + (2 + 4 * j + u) * 64);
        const __m512i lo = _mm512_shuffle_epi8(table, _mm512_and_si512(v, nib));
        const __m512i hi =
            _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(v, 4), nib));
        for (int t = 0; t < T; ++t) {
          int32_t xl, xh;
          std::memcpy(&xl, q + t * 2 * n_in + b * 32 + 4 * u, 4);
          std::memcpy(&xh, q + t * 2 * n_in + b * 32 + 16 + 4 * u, 4);
          sum[t][0] = _mm512_dpbusd_epi32(sum[t][0], lo, _mm512_set1_epi32(xl));
          sum[t][1] = _mm512_dpbusd_epi32(sum[t][1], hi, _mm512_set1_epi32(xh));
        }
      }
      // ls = (scales_l[j / 2] >> 4 (j % 2)) & 15 | ((scales_h >> 2j) & 3) << 4, for 16 rows.
      const __m512i ls = _mm512_or_si512(
          _mm512_and_si512(_mm512_srl_epi32(w1, _mm_cvtsi32_si128(8 * (j / 2) + 4 * (j % 2))), m4),
          _mm512_slli_epi32(_mm512_and_si512(_mm512_srl_epi32(sh, _mm_cvtsi32_si128(2 * j)), m2),
                            4));
      const __m512 sv =
          _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(ls, _mm512_set1_epi32(32))));
      for (int t = 0; t < T; ++t) {
        const __m512i isum = _mm512_sub_epi32(_mm512_add_epi32(sum[t][0], sum[t][1]),
                                              _mm512_set1_epi32(128 * sx[t * nb + b]));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                                 _mm512_mul_ps(sv, _mm512_set1_ps(dx[t * nb + b])), acc[t]);
      }
    }
  }
  for (int t = 0; t < T; ++t) acc_out[t] = acc[t];
}

// Decode over groups of 16 rows, two tokens per weight load.
template <I8mForm kForm, int T>
GEIST_I8MP_ATTR inline void super_tile(const uint8_t* grp, int64_t n_in, const int8_t* q,
                                       const float* dx, const int32_t* sx, __m512 acc[T]) {
  if constexpr (kForm == I8mForm::Q2K) {
    q2k_group_tile<T>(grp, n_in, q, dx, acc);
  } else if constexpr (kForm == I8mForm::Q3K) {
    q3k_group_tile<T>(grp, n_in, q, dx, acc);
  } else if constexpr (kForm == I8mForm::Q5K) {
    q5k_group_tile<T>(grp, n_in, q, dx, sx, acc);
  } else {
    iq4k_group_tile<T>(grp, n_in, q, dx, sx, acc);
  }
}

template <I8mForm kForm>
GEIST_I8MP_ATTR void group_rows(const uint8_t* src, size_t row_bytes, int count, int64_t n_in,
                                const int8_t* q, const float* dx, const int32_t* sx, int64_t n_tok,
                                float* out, int64_t out_stride) {
  const int64_t nb = n_in / 32;
  for (int r0 = 0; r0 < count; r0 += 16) {
    const uint8_t* grp = src + static_cast<size_t>(r0) * row_bytes;  // group r0 / 16
    const __mmask16 keep = count - r0 >= 16 ? static_cast<__mmask16>(0xffff)
                                            : static_cast<__mmask16>((1u << (count - r0)) - 1u);
    for (int64_t t = 0; t < n_tok; t += 2) {
      __m512 acc[2];
      if (n_tok - t >= 2) {
        super_tile<kForm, 2>(grp, n_in, q + t * 2 * n_in, dx + t * nb, sx + t * nb, acc);
        _mm512_mask_storeu_ps(out + (t + 1) * out_stride + r0, keep, acc[1]);
      } else {
        super_tile<kForm, 1>(grp, n_in, q + t * 2 * n_in, dx + t * nb, sx + t * nb, acc);
      }
      _mm512_mask_storeu_ps(out + t * out_stride + r0, keep, acc[0]);
    }
  }
}

}  // namespace

// Plain entry points (a target attribute on them would make GCC treat them as versions).
void q2k_rows_vnni(const uint8_t* src, size_t row_bytes, int count, int64_t n_in, const int8_t* q,
                   const float* dx, const int32_t* sx, int64_t n_tok, float* out,
                   int64_t out_stride) {
  group_rows<I8mForm::Q2K>(src, row_bytes, count, n_in, q, dx, sx, n_tok, out, out_stride);
}

void q3k_rows_vnni(const uint8_t* src, size_t row_bytes, int count, int64_t n_in, const int8_t* q,
                   const float* dx, const int32_t* sx, int64_t n_tok, float* out,
                   int64_t out_stride) {
  group_rows<I8mForm::Q3K>(src, row_bytes, count, n_in, q, dx, sx, n_tok, out, out_stride);
}

void q5k_rows_vnni(const uint8_t* src, size_t row_bytes, int count, int64_t n_in, const int8_t* q,
                   const float* dx, const int32_t* sx, int64_t n_tok, float* out,
                   int64_t out_stride) {
  group_rows<I8mForm::Q5K>(src, row_bytes, count, n_in, q, dx, sx, n_tok, out, out_stride);
}

void iq4k_rows_vnni(const uint8_t* src, size_t row_bytes, int count, int64_t n_in, const int8_t* q,
                    const float* dx, const int32_t* sx, int64_t n_tok, float* out,
                    int64_t out_stride) {
  group_rows<I8mForm::IQ4K>(src, row_bytes, count, n_in, q, dx, sx, n_tok, out, out_stride);
}

}  // namespace geist::simd::i8m_packed

#pragma GCC diagnostic pop
#endif  // __x86_64__
